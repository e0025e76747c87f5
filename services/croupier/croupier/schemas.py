"""JSON Schemas of every contract message, generated from the models in :mod:`contract`,
and the history API's OpenAPI document.

The files under ``contracts/`` are checked in; ``make contracts`` rewrites them and a unit test
fails when they drift from the models.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from contract.feed import EVENT_MODELS, FEED_EVENT_ADAPTER
from contract.settlement import RejectedLine, SettlementResult
from contract.wallet import WalletTransaction
from croupier.reconcile.contract import ReconciliationReport

DIALECT = "https://json-schema.org/draft/2020-12/schema"
MANAGED_DIRS = ("feed", "settlement", "replay", "wallet", "reconcile")
#: The history API's OpenAPI document (``croupier web`` serves the same at /openapi.json).
OPENAPI = "web/openapi.json"


class _Generator(GenerateJsonSchema):
    """Pydantic's generator, without ``"default": null`` on fields that are optional, not null."""

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        if schema.get("default", ...) is None:
            return self.generate_inner(schema["schema"])
        return super().default_schema(schema)


def _model_schema(
    model: type[BaseModel], title: str | None = None
) -> Callable[[], JsonSchemaValue]:
    def build() -> JsonSchemaValue:
        schema = model.model_json_schema(schema_generator=_Generator)
        if title is not None:
            schema["title"] = title
        return schema

    return build


def _event_union_schema() -> JsonSchemaValue:
    schema = FEED_EVENT_ADAPTER.json_schema(schema_generator=_Generator)
    schema["title"] = "FeedEvent"
    schema["description"] = "Any studio feed event, v1; event_type selects the payload."
    return schema


def schema_builders() -> dict[str, Callable[[], JsonSchemaValue]]:
    """Relative file path -> function building that file's schema."""
    builders: dict[str, Callable[[], JsonSchemaValue]] = {
        "feed/event.schema.json": _event_union_schema,
        "settlement/settlement-result.schema.json": _model_schema(SettlementResult),
        "replay/rejection.schema.json": _model_schema(RejectedLine),
        "wallet/wallet-transaction.schema.json": _model_schema(WalletTransaction),
        "reconcile/reconciliation-report.schema.json": _model_schema(ReconciliationReport),
    }
    for event_type, model in EVENT_MODELS.items():
        builders[f"feed/{event_type}.schema.json"] = _model_schema(model)
    builders[OPENAPI] = _openapi
    return dict(sorted(builders.items()))


def _openapi() -> JsonSchemaValue:
    from croupier.history.app import openapi_document

    return openapi_document()


def render(schema: JsonSchemaValue, *, dialect: bool = True) -> str:
    """Deterministic text of one schema: sorted keys, 2-space indent, trailing newline."""
    document: dict[str, Any] = {"$schema": DIALECT, **schema} if dialect else schema
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def expected_files() -> dict[str, str]:
    """Relative file path -> the text it must have."""
    return {
        path: render(build(), dialect=path != OPENAPI) for path, build in schema_builders().items()
    }


def _stale(out_dir: Path, expected: dict[str, str]) -> list[Path]:
    """Schema files in the managed folders that no model produces any more."""
    found = (p for d in MANAGED_DIRS for p in (out_dir / d).glob("*.schema.json"))
    return sorted(p for p in found if p.relative_to(out_dir).as_posix() not in expected)


def write_schemas(out_dir: Path) -> list[Path]:
    """Write every schema under ``out_dir``, remove stale ones; return the files written."""
    expected = expected_files()
    for path in _stale(out_dir, expected):
        path.unlink()
    written = []
    for relative, text in expected.items():
        target = out_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def check_schemas(out_dir: Path) -> list[str]:
    """Files under ``out_dir`` that are missing, differ from the models, or are stale."""
    expected = expected_files()
    problems = []
    for relative, text in expected.items():
        target = out_dir / relative
        if not target.is_file():
            problems.append(f"{relative} (missing)")
        elif target.read_text(encoding="utf-8") != text:
            problems.append(f"{relative} (out of date)")
    for path in _stale(out_dir, expected):
        problems.append(f"{path.relative_to(out_dir).as_posix()} (no longer generated)")
    return problems
