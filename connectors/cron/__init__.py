"""Scheduled jobs: when they are due, where they are kept, and the scheduler that runs them."""
