"""The draft's YAML is libyaml's where PyYAML has it, byte for byte what the Python emitter writes (issue 38:
the emitter was the largest share of a 700-number draft's time)."""

from __future__ import annotations

import yaml
from bench_ledger.queries.draft._claims_file import _dump  # private: the YAML emitter, compared byte for byte


def test_libyaml_output_is_the_python_emitters_also_beyond_the_bmp() -> None:
    data = {
        "claims": [
            {"id": "a", "locator": "§🤖 芯片和模型配置信息 row **model_name**, col NVIDIA_H100 (line 29:20-31)"},
            {"id": "b", "text": "约 394 倍", "evidence": {"why": ["concurrency 4 != 8", "x" * 300], "n": 0.1}},
            {"id": "c", "locator": "§📊 测试概览 🎯\ue000 private use kept", "value": "1,840,234"},
        ]
    }
    assert _dump(data) == yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=120)
