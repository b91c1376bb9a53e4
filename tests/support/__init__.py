"""Test helpers for Elowen: a scripted model server and offline set-up for real agent CLIs."""
