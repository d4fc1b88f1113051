"""The read side's queries: aggregates (windows, plans, the memo), filters, the
leaderboard and history. (/metrics reads through dashboard/web/prometheus.py.)"""
