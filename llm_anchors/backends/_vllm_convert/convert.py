"""Convert a GGUF model into a Hugging Face checkpoint vLLM loads (run by vLLM's own Python).

``python -I convert.py MODEL.gguf OUT_DIR``: the weights dequantised to bfloat16 (vLLM 0.32 has no
GGUF loader, and transformers keeps GGUF blocks quantised unless asked), no ``quantization_config``,
``architectures`` named, and a tokenizer that puts ``<bos>`` first as llama-server does (the
converted one adds none, and Gemma without it answers differently). It imports only what vLLM's venv
has: it is not part of the llm_anchors package. It sits in a folder of its own and is run isolated
(``-I``), so no module beside it can take the place of a standard-library module in that process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent),
        gguf_file=gguf.name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True),
    )
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [type(model).__name__]
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    _bos_first(out / "tokenizer.json", tokenizer.bos_token, tokenizer.bos_token_id)


def _bos_first(path: Path, bos: str, bos_id: int) -> None:
    """Make the fast tokenizer put ``bos`` before every prompt (a TemplateProcessing post-processor)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    first = {"SpecialToken": {"id": bos, "type_id": 0}}
    raw["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [first, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [first, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }
    path.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
