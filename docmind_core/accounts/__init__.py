"""Who may do what: users, sessions, API keys, access rules, rate and size limits, account removal."""
