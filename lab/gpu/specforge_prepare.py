"""SpecForge's own scripts/prepare_hidden_states.py, run as it is on a model without
weight files (lab/gpu/specforge_side_by_side.sh): run under torchrun as

    torchrun --nproc_per_node=1 specforge_prepare.py PREPARE_HIDDEN_STATES_PY [its args...]

Its in-process SGLang engine is built from ``ServerArgs(**_sglang_kwargs(args))``, which has
no way to say ``load_format``. This adds ``load_format="dummy"`` there and nothing else, so
its engine makes the same seeded random weights (sglang's ``initialize_dummy_weights``:
seed 1234 per parameter) as the collection's server started with ``--load-format dummy``.
Every other setting is the script's own. It also prints the layers sglang resolved
(``layers_to_capture`` of the engine's model) on a line of its own.
"""

import importlib.util
import sys


def main():
    script = sys.argv[1]
    sys.argv = [script] + sys.argv[2:]
    spec = importlib.util.spec_from_file_location("prepare_hidden_states", script)
    prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare)
    own_kwargs = prepare._sglang_kwargs  # pylint: disable=protected-access

    def with_dummy_weights(args):
        kwargs = own_kwargs(args)
        kwargs["load_format"] = "dummy"
        return kwargs

    own_build = prepare.build_target_model

    def build_and_report(*args, **kwargs):
        target = own_build(*args, **kwargs)
        # the layers sglang itself resolved from the ids SpecForge gave it
        model = target
        for attr in ("_backend", "model_runner", "model", "model"):
            model = getattr(model, attr, model)
        print(f"SPECFORGE_SGLANG_LAYERS_TO_CAPTURE {list(getattr(model, 'layers_to_capture', []))}",
              flush=True)
        return target

    prepare._sglang_kwargs = with_dummy_weights  # pylint: disable=protected-access
    prepare.build_target_model = build_and_report
    prepare.main()


if __name__ == "__main__":
    main()
