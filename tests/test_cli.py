import pytest

from llm_anchors import AnchorsExplainer, FunctionClassifier
from llm_anchors.cli import main, render
from tests.conftest import needs_all


@pytest.fixture(scope="module")
def exp():
    e = AnchorsExplainer(FunctionClassifier(needs_all("good", "great")), seed=0)
    return e.explain_sync("a good and great film, really")


def test_render_marks_the_anchor(exp):
    plain = render(exp)
    assert plain.splitlines()[0] == "a [good] and [great] film, really"
    assert "precision" in plain and "coverage" in plain and "cost        $0" in plain
    colored = render(exp, color=True)
    assert "\033[1;7mgood\033[0m" in colored


def test_usage_errors_exit_with_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["explain"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        main(["explain", "x", "--endpoint", "nope"])


def test_unreachable_server_is_a_clear_error(capsys):
    args = ["--max-queries", "5", "--max-attempts", "1", "--timeout", "5"]
    code = main(["explain", "a good film", "--base-url", "http://127.0.0.1:9/v1", *args])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "127.0.0.1:9" in err


def test_a_missing_prompt_file_is_a_clear_error(capsys, tmp_path):
    code = main(["explain", "a good film", "--base-url", "http://127.0.0.1:9/v1", "--prompt", f"@{tmp_path}/none.txt"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --prompt @") and "none.txt" in err and "Traceback" not in err
