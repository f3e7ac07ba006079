"""Synthetic raw data set shaped after the H20 case-study report (see ``generate``)."""

__all__: list[str] = []
