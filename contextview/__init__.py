"""contextview: observability for the working context of LLM agents.

Nothing is imported here, so that ``contextview.sdk`` (which agents import) pulls
in neither Django nor Celery. The Celery app is created when Django starts, by
``contextview.stats.apps.StatsConfig.ready``; ``celery -A contextview`` finds it
in ``contextview.celery``.
"""
