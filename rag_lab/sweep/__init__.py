"""Sweep analysis: leaderboards, significance marks and plots over finished trials."""
