"""Tests of the LLM judge: prompt files and requests, and the client against the fake OpenAI server."""

__all__: list[str] = []
