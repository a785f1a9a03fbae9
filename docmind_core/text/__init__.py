"""Text helpers every layer shares: tokens and sentences, excerpts, invisible characters, question signals."""
