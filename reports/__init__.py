"""Result collection (results.jsonl) and rendering (summary tables, reports)."""
