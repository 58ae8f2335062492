"""The model dir, conversations and draft config that the collection and SpecForge's own
pipeline both run on (lab/gpu/specforge_side_by_side.sh).

    python3 specforge_model.py OUT_DIR [--layers 61] [--hidden 512] [--experts 16]
                               [--conversations 80] [--max-tokens 4000] [--seed 7]
                               [--distinct-lengths]

Writes into OUT_DIR:
  model/          config.json (DeepSeek-V3-shaped, served with --load-format dummy on both
                  sides, so the weights are sglang's seeded dummy ones), a word-level
                  tokenizer over the whole vocabulary with Qwen's ChatML template
                  (tokenizer.json, tokenizer_config.json: both sides load it offline), and
                  model.safetensors with only the two tensors SpecForge's trainer reads
                  from the target (model.embed_tokens.weight, lm_head.weight; sglang's
                  dummy loader reads no file)
  conversations.jsonl   --conversations chats of exactly --min-tokens to --max-tokens
                  tokens (spread on a log scale), one to three rounds, some with their own
                  system prompt; with --distinct-lengths no two of one length
  draft.json      a one-layer LlamaForCausalLMEagle3 draft config without
                  eagle_aux_hidden_state_layer_ids, so SpecForge resolves its default
                  layers [1, n//2-1, n-4]
The template's markers are SpecForge's "qwen" template's: assistant header
"<|im_start|>assistant\\n", end of turn "<|im_end|>\\n", system prompt
"You are a helpful assistant.".
"""

import argparse
import json
import math
import os
import random

from model_config import text_config

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content']"
          " + '<|im_end|>' + '\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PLAIN = ["\n", "system", "user", "assistant", "You", "are", "a", "helpful", "assistant."]
SYSTEM_PROMPT = "You are a helpful assistant."


def write_tokenizer(model_dir, vocab_size):
    """A word-level fast tokenizer: one token a word, a newline a token of its own."""
    # pylint: disable=import-outside-toplevel
    import tokenizers
    from tokenizers import pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = SPECIAL + PLAIN
    words += [f"w{n}" for n in range(vocab_size - len(words))]
    model = tokenizers.models.WordLevel(vocab={w: i for i, w in enumerate(words)},
                                        unk_token="<|endoftext|>")
    tok = tokenizers.Tokenizer(model)
    # spaces separate words and are dropped; a newline is a token (the template has them)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(r"[^\S\n]+"), behavior="removed"),
        pre_tokenizers.Split("\n", behavior="isolated")])
    tok.decoder = tokenizers.decoders.WordPiece(prefix="##")  # joins words with spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<|endoftext|>",
                                   pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                   additional_special_tokens=SPECIAL[1:])
    fast.chat_template = CHATML
    fast.save_pretrained(model_dir)
    return len(words)


def write_heads(model_dir, vocab_size, hidden, seed):
    """The target's embedding and LM head for SpecForge's trainer. sglang's dummy weights
    are uniform in +-1e-3, the final norm's too, so the final hidden state's entries are
    about 5e-4: an LM head of std 300 gives logits of std about 3 (sqrt(hidden) * 300 *
    5e-4), a target distribution with something to learn. With std 1 its logits would
    differ by hundredths and every target would be flat."""
    # pylint: disable=import-outside-toplevel
    import torch
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed)
    tensors = {
        "model.embed_tokens.weight": torch.randn(vocab_size, hidden, generator=gen) * 0.02,
        "lm_head.weight": torch.randn(vocab_size, hidden, generator=gen) * 300.0,
    }
    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()}
    save_file(tensors, os.path.join(model_dir, "model.safetensors"))
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {}, "weight_map": {k: "model.safetensors" for k in tensors}}, f)


# the ChatML template's tokens around a turn's words: <|im_start|> role \n ... <|im_end|> \n
TURN_TOKENS = 5
DEFAULT_SYSTEM_TOKENS = TURN_TOKENS + len(SYSTEM_PROMPT.split())


def conversation(rng, total, words, rounds=None):
    """One chat of exactly ``total`` tokens (one token a word): rounds of user and
    assistant turns, a quarter of them with a system prompt of their own."""
    if rounds is None:
        rounds = rng.choice([1, 1, 2, 3]) if total > 64 else 1
    own_system = rounds > 1 and rng.random() < 0.25
    turns = [{"role": "system", "content": " ".join(rng.choices(words, k=4))}] if own_system else []
    budget = total - (TURN_TOKENS + 4 if own_system else DEFAULT_SYSTEM_TOKENS) - 2 * TURN_TOKENS * rounds
    if budget < 2 * rounds:
        raise ValueError(f"{total} tokens cannot hold {rounds} rounds")
    for left in range(rounds, 0, -1):
        share = budget // left
        user = max(1, min(share - 1, int(share * rng.uniform(0.2, 0.7))))
        turns.append({"role": "user", "content": " ".join(rng.choices(words, k=user))})
        turns.append({"role": "assistant", "content": " ".join(rng.choices(words, k=share - user))})
        budget -= share
    return turns


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=61)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--conversations", type=int, default=80)
    parser.add_argument("--min-tokens", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--single-round", action="store_true",
                        help="one user and one assistant turn each (the speed runs)")
    parser.add_argument("--distinct-lengths", action="store_true",
                        help="no two conversations of one length (lab/gpu/online_real_engine.py order tells an "
                             "online trainer's samples apart by their token counts)")
    args = parser.parse_args()
    model_dir = os.path.join(args.out, "model")
    os.makedirs(model_dir, exist_ok=True)
    cfg = text_config(args.hidden, args.layers, args.experts, 8192)
    vocab = cfg["vocab_size"]
    with open(os.path.join(model_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(model_dir, "generation_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token_id": 0, "eos_token_id": 1, "do_sample": False}, f)
    write_tokenizer(model_dir, vocab)
    write_heads(model_dir, vocab, args.hidden, args.seed)

    rng = random.Random(args.seed)
    words = [f"w{n}" for n in range(vocab - len(SPECIAL) - len(PLAIN))]
    # lengths spread evenly on a log scale from --min-tokens to --max-tokens
    span = math.log(args.max_tokens / args.min_tokens)
    lengths = [round(args.min_tokens * math.exp(span * i / (args.conversations - 1)))
               for i in range(args.conversations)]
    if args.distinct_lengths:
        # the log scale rounds a few short ones alike (24 to 2,048 over 144: two of 26): each one longer
        # than the one before
        for i in range(1, len(lengths)):
            lengths[i] = max(lengths[i], lengths[i - 1] + 1)
        if lengths[-1] > args.max_tokens:
            parser.error(f"--distinct-lengths: {args.conversations} lengths do not fit "
                         f"{args.min_tokens} to {args.max_tokens} tokens")
    rng.shuffle(lengths)
    with open(os.path.join(args.out, "conversations.jsonl"), "w", encoding="utf-8") as f:
        for n, total in enumerate(lengths):
            f.write(json.dumps({"id": f"c{n}", "conversations": conversation(
                rng, total, words, 1 if args.single_round else None)}) + "\n")

    draft = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
        "hidden_size": args.hidden, "intermediate_size": 2 * args.hidden,
        "num_attention_heads": args.hidden // 64, "num_key_value_heads": args.hidden // 64,
        "num_hidden_layers": 1, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "max_position_embeddings": 8192, "rope_theta": 10000, "initializer_range": 0.02,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
        "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 0,
        "vocab_size": vocab, "draft_vocab_size": 8000,
    }
    with open(os.path.join(args.out, "draft.json"), "w", encoding="utf-8") as f:
        json.dump(draft, f, indent=2)
    print(f"wrote {model_dir} ({args.layers} layers, hidden {args.hidden}), "
          f"{args.conversations} conversations of {min(lengths)}-{max(lengths)} tokens, draft.json")


if __name__ == "__main__":
    main()
