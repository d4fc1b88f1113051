"""The Django project and the read side (see README "Layout").

Nothing here runs at import: the Celery app is created where Celery starts
(dashboard/celery.py, DashboardConfig.ready).
"""
