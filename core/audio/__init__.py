"""Audio after synthesis: the formats clients ask for, encoded whole or piece by piece."""
