"""Who a client is (identity) and what it may take (rate limits, connection caps)."""
