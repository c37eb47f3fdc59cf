# Production image: gunicorn for the web, the same image for the Celery worker and beat
# (see docker-compose.yml). Configuration comes from the environment: DATABASE_URL,
# CELERY_BROKER_URL, SECRET_KEY, ALLOWED_HOSTS, DEBUG.
# gunicorn's threads must not face clients directly (a slow client holds a thread):
# run it behind a buffering proxy, as docker-compose.yml does with nginx
# (deploy/nginx.conf.template), and set BEHIND_PROXY=true.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=contextview.settings

WORKDIR /app

COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .
RUN python manage.py collectstatic --noinput --verbosity 0 \
    && useradd --system --home-dir /app --shell /usr/sbin/nologin contextview \
    && mkdir -p /app/data \
    && chown -R contextview:contextview /app/data

USER contextview
EXPOSE 8000

CMD ["gunicorn", "contextview.wsgi", "--bind", "0.0.0.0:8000", \
     "--timeout", "60", "--access-logfile", "-", "--no-control-socket"]
