"""The names Actae publishes its spans, attributes and instruments under (docs/telemetry.md).

They are a public contract, like a table's columns: dashboards and alerts are written
against them, so each is spelled here once and nowhere else.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

SCOPE = "actae"
"""The instrumentation scope of every tracer and meter (``trace.get_tracer("actae", ...)``)."""
try:
    SCOPE_VERSION = version("actae")
except PackageNotFoundError:  # pragma: no cover - a copy of the tree that is not installed
    SCOPE_VERSION = "0"

# -- spans ----------------------------------------------------------------------------------
RUN_SPAN = "actae.run"
START_SPAN = "actae.start"
FORK_SPAN = "actae.fork"
STEP_SPAN = "actae.step"
EFFECT_SPAN = "actae.effect"
TRANSITION_SPAN = "actae.transition"
WAIT_SPAN = "actae.wait"

# -- attributes -----------------------------------------------------------------------------
RUN_ID = "actae.run_id"
WORKFLOW_ID = "actae.workflow_id"
AGENT_ID = "actae.agent_id"
WORKER = "actae.worker"
CURSOR = "actae.cursor"
STATE_VERSION = "actae.state_version"
OPERATION_ID = "actae.operation_id"
REPLAYED = "actae.replayed"
RUN_OUTCOME = "actae.run.outcome"
EFFECT_ATTEMPT = "actae.effect.attempt"
EFFECT_FENCING_TOKEN = "actae.effect.fencing_token"  # noqa: S105 - a name, no secret
EFFECT_OUTCOME = "actae.effect.outcome"
EFFECT_IN_DOUBT = "actae.effect.in_doubt"
WAIT_NAME = "actae.wait.name"
WAIT_OUTCOME = "actae.wait.outcome"
STATUS = "actae.status"
COST = "actae.cost"
# OpenTelemetry's GenAI semantic conventions, where a step is a model call.
MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"

USAGE_ATTRIBUTES = {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS, "cost": COST}
"""A step's ``usage`` keys and the span attributes they are reported as."""

# -- effect outcomes (``actae.effect.outcome``) ---------------------------------------------
COMPLETED = "completed"
FAILED = "failed"
IN_DOUBT = "in doubt"
REPLAYED_OUTCOME = "replayed"

# -- instruments ----------------------------------------------------------------------------
STEPS = "actae.steps"
STEP_DURATION = "actae.step.duration"
EFFECT_ATTEMPTS = "actae.effect.attempts"
EFFECT_RETRIES = "actae.effect.retries"
EFFECTS_IN_DOUBT = "actae.effects.in_doubt"
RUNS = "actae.runs"
PROJECTION_LAG = "actae.projection.lag"
