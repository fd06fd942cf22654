"""Question answering (FRAMES, GSM8K) on ToolOrchestra's expert surface or a basic one, graded."""

from toolorch_jax.envs.qa.env import QAEnvironment, QAEpisode, Settings
from toolorch_jax.envs.qa.graders import ExactMatch, Grade, LLMJudge, NumericMatch

__all__ = ["ExactMatch", "Grade", "LLMJudge", "NumericMatch", "QAEnvironment", "QAEpisode",
           "Settings"]
