"""Callbacks (webhooks): where they may go (`targets`), how they are signed (`signing`), and the
sender that delivers them (`sender`)."""
