"""Result records, their JSONL store, provenance, statistics and reports."""
