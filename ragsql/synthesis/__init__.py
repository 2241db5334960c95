"""Test-set generation from a corpus (`ragsql synth`): questions, reference answers, gold spans."""

from ragsql.synthesis.synthesizer import Question, SynthResult, synthesize

__all__ = ["Question", "SynthResult", "synthesize"]
