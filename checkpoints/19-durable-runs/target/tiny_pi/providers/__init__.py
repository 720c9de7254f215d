"""Providers: real models behind a network api, speaking tiny_pi's Model protocol."""

from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
from tiny_pi.providers.outbound import ToolSpec

__all__ = ["OpenAICompatibleModel", "ToolSpec"]
