"""`ragsql generate`: answers with ``[docno]`` citations for a run's queries, from its retrieved results."""

from ragsql.generate.generator import Calls, GenerationFailed, generator_name, make_generator
from ragsql.generate.runner import GenerateResult, Plan, generate_answers, generate_run, prepare_run

__all__ = [
    "Calls",
    "GenerateResult",
    "GenerationFailed",
    "Plan",
    "generate_answers",
    "generate_run",
    "generator_name",
    "make_generator",
    "prepare_run",
]
