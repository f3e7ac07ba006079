"""The importer tests use the root conftest's ``samples`` (skips, or fails with LEDGER_REQUIRE_SAMPLES=1,
when ../shared/samples is absent) and ``fixtures``: nothing of their own."""
