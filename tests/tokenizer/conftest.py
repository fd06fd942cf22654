"""Shared tokenizers for the tokenizer tests."""

import json

import pytest

from toolorch_jax.datadir import data_path
from toolorch_jax.tokenizer import load_tokenizer, train_sentencepiece


@pytest.fixture(scope="session")
def qwen_tokenizer():
  return load_tokenizer(data_path("qwen3"))


@pytest.fixture(scope="session")
def sp_tokenizer(tmp_path_factory):
  with data_path("gsm8k/test.jsonl").open(encoding="utf-8") as lines:
    questions = [json.loads(line)["question"] for line in lines]
  path = train_sentencepiece(questions, 1000, tmp_path_factory.mktemp("sp"))
  return load_tokenizer(path)
