"""Text before synthesis: hygiene, sentence cuts, and normalization into speakable words."""
