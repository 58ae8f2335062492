"""config.json for the DeepSeek-V3-shaped models the real-SGLang proofs serve with
``--load-format dummy`` (random weights, the same for the same seed; no weight
files): DeepSeek-V3 / Kimi-K2's MLA dimensions, and the sizes given.

    python3 model_config.py OUT_DIR [--hidden 2048] [--layers 4] [--experts 16]
                            [--context 16384] [--kimi-k25]

``--kimi-k25`` wraps the same text model in Kimi-K2.5's vision wrapper
(``KimiK25ForConditionalGeneration``, a small MoonViT), to see whether sglang serves it.
"""

import argparse
import json
import os


def text_config(hidden, layers, experts, context):
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": None,
        "ep_size": 1, "first_k_dense_replace": 1, "hidden_act": "silu",
        "hidden_size": hidden, "initializer_range": 0.02, "intermediate_size": 2 * hidden,
        "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "max_position_embeddings": context,
        "moe_intermediate_size": 512, "moe_layer_freq": 1, "n_group": 1, "topk_group": 1,
        "n_routed_experts": experts, "n_shared_experts": 1, "num_experts_per_tok": 4,
        "norm_topk_prob": True, "num_attention_heads": 16, "num_key_value_heads": 16,
        "num_hidden_layers": layers, "num_nextn_predict_layers": 0, "rms_norm_eps": 1e-06,
        "rope_theta": 10000, "rope_scaling": None, "routed_scaling_factor": 2.5,
        "scoring_func": "sigmoid", "topk_method": "noaux_tc", "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 32000,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--context", type=int, default=16384)
    parser.add_argument("--kimi-k25", action="store_true")
    args = parser.parse_args()
    cfg = text_config(args.hidden, args.layers, args.experts, args.context)
    if args.kimi_k25:
        cfg = {
            "architectures": ["KimiK25ForConditionalGeneration"],
            "model_type": "kimi_k25",
            "text_config": cfg,
            "vision_config": {
                "patch_size": 14, "init_pos_emb_height": 64, "init_pos_emb_width": 64,
                "num_attention_heads": 4, "num_hidden_layers": 2, "hidden_size": 256,
                "intermediate_size": 512, "merge_kernel_size": [2, 2],
                "mm_hidden_size": 256, "text_hidden_size": args.hidden,
            },
            "media_placeholder_token_id": 31999,
            "torch_dtype": "bfloat16",
        }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    # keeps sglang/transformers from looking for one elsewhere
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 0, "eos_token_id": 1, "do_sample": False}, f)
    print(f"wrote {args.out}/config.json ({cfg['architectures'][0]})")


if __name__ == "__main__":
    main()
