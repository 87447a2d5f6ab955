"""tinyhw's tests, in folders by feature (docs/testing.md)."""
