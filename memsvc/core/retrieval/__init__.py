"""Retrieve: candidates by strategy, keyword relevance and hybrid fusion, the conversation signals, the relevance floor and the vector tiers seen from the engine."""
