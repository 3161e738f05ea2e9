"""The harness: run folders, planning, isolation, judging and result writing."""
