"""What every benchmark stands on: its command line and lifetime (harness), the systems it starts
(stack), its figures (stats, runs) and its report (report)."""
