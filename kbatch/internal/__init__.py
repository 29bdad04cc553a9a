"""What a broker knows: internal topics, producer state and checkpoints as tables."""
