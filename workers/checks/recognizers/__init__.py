"""Recognizers that hear a segment against its text, chosen by CHATTTS_RECOGNIZER."""
