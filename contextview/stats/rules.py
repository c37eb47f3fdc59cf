"""What a migration runs when the rules the workers compute by change."""

from __future__ import annotations

# Entities are stored once per content (cv_blob_info.entities), and an operation's lost
# entities as places in them, so both go together: the stored entities are set to null,
# to be extracted again when next asked for, and every session's step statistics are
# deleted, the session pending with its epoch moved on (kept replay totals are summed
# again), for the statistics workers' sweep to compute them again.
ENTITIES_AND_STATISTICS_AGAIN = [
    "UPDATE cv_blob_info SET entities = NULL WHERE entities IS NOT NULL",
    "TRUNCATE cv_step_stats",
    "UPDATE cv_session SET stats_status = 'pending', stats_steps_done = 0, "
    "stats_epoch = stats_epoch + 1",
]
