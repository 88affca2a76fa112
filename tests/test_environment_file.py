"""environment.yml: the CUDA compiler it installs has the CUDA major of the torch it pins."""

import os
import re

import pytest
import torch
import yaml

ENVIRONMENT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "environment.yml")


def _read() -> tuple[dict, str]:
    with open(ENVIRONMENT, encoding="utf-8") as handle:
        text = handle.read()
    return yaml.safe_load(text), text


def test_nvcc_is_pinned_to_a_cuda_version_and_torch_to_a_release():
    data, text = _read()
    conda = [entry for entry in data["dependencies"] if isinstance(entry, str)]
    pip = next(entry["pip"] for entry in data["dependencies"] if isinstance(entry, dict))
    assert "cuda-nvcc" in conda and any(re.fullmatch(r"cuda-version=\d+\.\d+", entry) for entry in conda)
    assert any(re.fullmatch(r"torch==[\d.]+", entry) for entry in pip)
    assert "bubblewrap" in text and "system package" in text  # not from conda: said where it comes from


def test_the_pinned_cuda_is_the_one_torch_was_built_with():
    data, _ = _read()
    cuda = next(
        entry.split("=")[1]
        for entry in data["dependencies"]
        if isinstance(entry, str) and entry.startswith("cuda-version=")
    )
    pinned = next(
        entry.split("==")[1]
        for entry in next(e["pip"] for e in data["dependencies"] if isinstance(e, dict))
        if entry.startswith("torch==")
    )
    if torch.__version__.split("+")[0] != pinned or not torch.version.cuda:
        pytest.skip(f"torch {torch.__version__} here, not the CUDA build of {pinned} that environment.yml pins")
    assert cuda.split(".")[0] == torch.version.cuda.split(".")[0], (cuda, torch.version.cuda)
