"""Cost of a model call: ``genai-prices`` (a maintained price table that works offline),
overridden by a user's own prices.

A model no table knows is *unpriced* (``None``), never 0: a roll-up over unpriced calls says
so instead of showing a cost that is too low.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any, cast

from soloflow_core.models.config import ModelPrice

__all__ = ["PriceTable"]

log = logging.getLogger(__name__)
_MTOK = Decimal(1_000_000)


class PriceTable:
    """Prices model calls in USD.

    Args:
        overrides: model name → :class:`~soloflow_core.models.ModelPrice`; a name given here
            is priced from it, whatever ``genai-prices`` says.

    Example:
        >>> PriceTable().price("gpt-4o", input_tokens=1000, output_tokens=100)
        Decimal('0.0035')
        >>> PriceTable().price("my-own-model", input_tokens=1, output_tokens=1) is None
        True
    """

    def __init__(self, overrides: Mapping[str, ModelPrice] | None = None) -> None:
        self.overrides = dict(overrides or {})

    def price(self, model: str | None, *, input_tokens: int, output_tokens: int) -> Decimal | None:
        """The call's cost in USD, or None when the model is unknown (unpriced).

        Raises:
            ValueError: a count below 0, for every model alike (a table's tiered price
                refuses one; a flat one would price it as a refund).
        """
        if not model:
            return None
        if input_tokens < 0 or output_tokens < 0:
            raise ValueError(
                f"token counts must be 0 or more (got input_tokens={input_tokens}, "
                f"output_tokens={output_tokens}); soloflow_core.ledger.token_usage reads a "
                "model's reported usage into counts that are"
            )
        own = self.overrides.get(model)
        if own is not None:
            return (
                Decimal(str(own.input_per_mtok)) * input_tokens
                + Decimal(str(own.output_per_mtok)) * output_tokens
            ) / _MTOK
        return _table_price(model, input_tokens, output_tokens)

    def cost(self, model: str | None, *, input_tokens: int, output_tokens: int) -> float | None:
        """``float(self.price(...))``, the same float: a model of the table with flat prices is
        priced in integers (its rates kept per model as integers over one power of ten),
        exactly what the decimal sum is before it is turned into a float.

        Raises:
            ValueError: a count below 0 (as :meth:`price`).
        """
        if not model:
            return None
        if model not in self.overrides and input_tokens >= 0 and output_tokens >= 0:
            rates = _scaled_rates(model)
            if rates is not None:
                inp, out, scale = rates
                a, b = inp * input_tokens, out * output_tokens
                total = a + b
                if (
                    total
                    and -_EXACT < a < _EXACT
                    and -_EXACT < b < _EXACT
                    and -_EXACT < total < _EXACT
                ):
                    return total / scale  # int / int: the float nearest the exact quotient
        price = self.price(model, input_tokens=input_tokens, output_tokens=output_tokens)
        return None if price is None else float(price)


_EXACT = 10**27
"""Integers below this, multiplied, summed and divided by a power of ten with the decimal
module's default 28 digits, are exact: the integer sum, then divided once, is the same value."""


@lru_cache(maxsize=1024)
def _scaled_rates(model: str) -> tuple[int, int, int] | None:
    """The table's flat rates of ``model`` as integers ``(input, output, scale)``: ``input /
    scale`` USD per token; None for a model that is unknown, tiered or not held in 27 digits."""
    rates = _rates(model)
    if not isinstance(rates, tuple):
        return None
    inp, out = rates
    if not (inp.is_finite() and out.is_finite()):
        return None
    shift = max(0, -int(inp.as_tuple().exponent), -int(out.as_tuple().exponent))
    whole = [r.scaleb(shift) for r in rates]
    if any(w != w.to_integral_value() or abs(w) >= _EXACT for w in whole):
        return None
    return int(whole[0]), int(whole[1]), 10 ** (shift + 6)


def _table_price(model: str, input_tokens: int, output_tokens: int) -> Decimal | None:
    rates = _rates(model)
    if rates is None:
        return None
    if isinstance(rates, tuple):
        return cast("Decimal | None", (rates[0] * input_tokens + rates[1] * output_tokens) / _MTOK)
    from genai_prices import Usage

    return Decimal(
        rates.calc_price(Usage(input_tokens=input_tokens, output_tokens=output_tokens))[
            "total_price"
        ]
    )


@lru_cache(maxsize=1024)
def _rates(model: str) -> tuple[Decimal, Decimal] | Any | None:
    """The model's price per million input and output tokens, found once per model (finding it
    costs hundreds of µs); the table's own price object when its prices are tiered; None when
    the table does not know the model."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # pragma: no cover - a dependency; only a broken install lacks it
        log.warning("genai-prices is not installed: model calls are unpriced")
        return None
    try:
        price = calc_price(Usage(input_tokens=0, output_tokens=0), model_ref=model).model_price
    except LookupError:
        return None
    inp, out = price.input_mtok, price.output_mtok
    if isinstance(inp, Decimal | int | None) and isinstance(out, Decimal | int | None):
        return Decimal(inp or 0), Decimal(out or 0)
    return price
