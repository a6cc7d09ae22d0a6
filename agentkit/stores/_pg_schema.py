"""The PostgreSQL stores' schema (private, pure): the SQL ``migrate()`` runs, its table
layout version, schema-name checks and the LISTEN/NOTIFY channel name."""

from __future__ import annotations

import re

from ..errors import ConfigurationError
from .base import SCHEMA_VERSION

__all__ = ["LAYOUT", "SCHEMA_SQL", "channel_name", "check_schema_name", "schema_sql"]

LAYOUT = 2
"""The table layout :func:`schema_sql` creates: 1 = before turn locks, 2 = turn locks."""

_SCHEMA_RE = re.compile(r"[a-z_][a-z0-9_]{0,39}")

# The whole schema, for one application schema named {schema}. migrate() runs it in one
# transaction under an advisory lock, so it is idempotent and safe from several hosts at
# once. docs/durability.md shows it for the schema "agentkit" (tests check they agree).
SCHEMA_SQL = """\
CREATE SCHEMA IF NOT EXISTS {schema};

CREATE TABLE IF NOT EXISTS {schema}.meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- one row per session: its revision and the position of its next event
CREATE TABLE IF NOT EXISTS {schema}.sessions (
    session_id text PRIMARY KEY,
    revision   bigint NOT NULL,
    head       bigint NOT NULL
);

-- the active log: position orders it; rev is the revision that includes the row
CREATE TABLE IF NOT EXISTS {schema}.events (
    session_id text   NOT NULL,
    position   bigint NOT NULL,
    rev        bigint NOT NULL,
    event_id   text   NOT NULL,
    body       text   NOT NULL,  -- the event as agentkit's strict JSON
    PRIMARY KEY (session_id, position)
);
CREATE INDEX IF NOT EXISTS events_rev ON {schema}.events (session_id, rev);

-- events moved out of the active log by compaction (and explicit archives)
CREATE TABLE IF NOT EXISTS {schema}.archives (
    session_id text   NOT NULL,
    archive_id text   NOT NULL,
    event_ids  text[] NOT NULL,
    body       text   NOT NULL,  -- a JSON array of the events
    PRIMARY KEY (session_id, archive_id)
);

-- job snapshots; name lets each job runner keep its own jobs
CREATE TABLE IF NOT EXISTS {schema}.jobs (
    name         text   NOT NULL,
    execution_id text   NOT NULL,
    revision     bigint NOT NULL,
    started_at   double precision NOT NULL,
    state        text   NOT NULL,
    PRIMARY KEY (name, execution_id)
);

-- compare-and-swap append: the new revision, or -(actual revision) - 1 when stale
CREATE OR REPLACE FUNCTION {schema}.append_events(
    p_session text, p_expected bigint, p_ids text[], p_bodies text[]
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v_rev  bigint;
    v_head bigint;
    v_n    integer := coalesce(array_length(p_bodies, 1), 0);
BEGIN
    LOOP  -- a row another writer creates may be deleted again before we lock it
        SELECT revision, head INTO v_rev, v_head
          FROM {schema}.sessions WHERE session_id = p_session FOR UPDATE;
        EXIT WHEN FOUND;
        IF p_expected <> 0 THEN RETURN -1; END IF;
        INSERT INTO {schema}.sessions (session_id, revision, head)
             VALUES (p_session, 0, 0) ON CONFLICT (session_id) DO NOTHING;
    END LOOP;
    IF v_rev <> p_expected THEN RETURN -v_rev - 1; END IF;
    IF v_n = 0 THEN RETURN v_rev; END IF;
    INSERT INTO {schema}.events (session_id, position, rev, event_id, body)
         SELECT p_session, v_head + i - 1, v_rev + i, p_ids[i], p_bodies[i]
           FROM generate_series(1, v_n) AS i;
    UPDATE {schema}.sessions SET revision = v_rev + v_n, head = v_head + v_n
     WHERE session_id = p_session;
    PERFORM pg_notify({channel}, p_session || ' ' || (v_rev + v_n));
    RETURN v_rev + v_n;
END
$fn$;

-- keep events under an archive id; the same ids again is a no-op (AK001: different ones)
CREATE OR REPLACE FUNCTION {schema}.archive_events(
    p_session text, p_archive text, p_ids text[], p_body text
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_ids text[];
BEGIN
    LOOP  -- the archive in the way may be deleted (with its session) before we read it
        INSERT INTO {schema}.archives (session_id, archive_id, event_ids, body)
             VALUES (p_session, p_archive, p_ids, p_body)
        ON CONFLICT (session_id, archive_id) DO NOTHING;
        EXIT WHEN FOUND;
        SELECT event_ids INTO v_ids FROM {schema}.archives
         WHERE session_id = p_session AND archive_id = p_archive;
        IF FOUND THEN
            IF v_ids IS DISTINCT FROM p_ids THEN
                RAISE EXCEPTION 'archive holds different events' USING ERRCODE = 'AK001';
            END IF;
            EXIT;
        END IF;
    END LOOP;
END
$fn$;

-- compare-and-swap compaction: archive the first p_remove events, put the summary in
-- their place; the new revision, or -(actual revision) - 1 when stale (AK002: too few)
CREATE OR REPLACE FUNCTION {schema}.compact_events(
    p_session text, p_archive text, p_expected bigint, p_remove integer,
    p_ids text[], p_bodies text[]
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v_rev    bigint;
    v_head   bigint;
    v_active bigint;
    v_last   bigint;
    v_ids    text[];
    v_body   text;
    v_n      integer := coalesce(array_length(p_bodies, 1), 0);
BEGIN
    SELECT revision, head INTO v_rev, v_head
      FROM {schema}.sessions WHERE session_id = p_session FOR UPDATE;
    IF NOT FOUND THEN
        IF p_expected <> 0 THEN RETURN -1; END IF;
        RAISE EXCEPTION 'too few events' USING ERRCODE = 'AK002', DETAIL = '0';
    END IF;
    IF v_rev <> p_expected THEN RETURN -v_rev - 1; END IF;
    SELECT count(*) INTO v_active FROM {schema}.events WHERE session_id = p_session;
    IF p_remove > v_active THEN
        RAISE EXCEPTION 'too few events' USING ERRCODE = 'AK002', DETAIL = v_active::text;
    END IF;
    SELECT array_agg(event_id ORDER BY position),
           '[' || string_agg(body, ',' ORDER BY position) || ']', max(position)
      INTO v_ids, v_body, v_last
      FROM (SELECT event_id, body, position FROM {schema}.events
             WHERE session_id = p_session ORDER BY position LIMIT p_remove) AS removed;
    PERFORM {schema}.archive_events(p_session, p_archive, v_ids, v_body);
    DELETE FROM {schema}.events WHERE session_id = p_session AND position <= v_last;
    INSERT INTO {schema}.events (session_id, position, rev, event_id, body)
         SELECT p_session, v_last - v_n + i, v_rev + 1, p_ids[i], p_bodies[i]
           FROM generate_series(1, v_n) AS i;
    UPDATE {schema}.sessions SET revision = v_rev + 1 WHERE session_id = p_session;
    PERFORM pg_notify({channel}, p_session || ' ' || (v_rev + 1));
    RETURN v_rev + 1;
END
$fn$;

-- remove a session and its archives. Deleting the session row first waits for appends
-- in flight and holds off new ones (theirs included) until this commits, so the events
-- removed next are all of them: none is left behind without its session.
CREATE OR REPLACE FUNCTION {schema}.delete_session(p_session text)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    v_found boolean;
    v_archives integer;
BEGIN
    DELETE FROM {schema}.sessions WHERE session_id = p_session;
    v_found := FOUND;
    IF v_found THEN
        DELETE FROM {schema}.events WHERE session_id = p_session;
    END IF;
    DELETE FROM {schema}.archives WHERE session_id = p_session;
    GET DIAGNOSTICS v_archives = ROW_COUNT;
    PERFORM pg_notify({channel}, p_session || ' deleted');
    RETURN v_found OR v_archives > 0;
END
$fn$;

-- turn locks (table layout 2). Session X's turn lock is a session-level advisory lock on
-- turn_key(X), held on a connection of its own: PostgreSQL releases it when that
-- connection ends. Each grant takes the session's next epoch; an append made under the
-- lock checks, in its transaction, that the epoch is still current and the lock still
-- held by the granted connection (fencing).
CREATE TABLE IF NOT EXISTS {schema}.turn_epochs (
    session_id text   PRIMARY KEY,
    epoch      bigint NOT NULL
);

CREATE OR REPLACE FUNCTION {schema}.turn_key(p_session text)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $fn$
    SELECT hashtextextended({key_prefix} || p_session, 0)
$fn$;

-- the turn lock and its epoch, or 0 when another connection held the lock for all of
-- p_wait_ms (0: do not wait). A waiter queues in the server: it is woken at the release.
CREATE OR REPLACE FUNCTION {schema}.take_turn(p_session text, p_wait_ms integer)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v_epoch bigint;
    v_saved text := current_setting('lock_timeout');
BEGIN
    IF p_wait_ms <= 0 THEN
        IF NOT pg_try_advisory_lock({schema}.turn_key(p_session)) THEN RETURN 0; END IF;
    ELSE
        PERFORM set_config('lock_timeout', p_wait_ms || 'ms', true);
        BEGIN
            PERFORM pg_advisory_lock({schema}.turn_key(p_session));
        EXCEPTION WHEN lock_not_available THEN
            RETURN 0;
        END;
        PERFORM set_config('lock_timeout', v_saved, true);
    END IF;
    INSERT INTO {schema}.turn_epochs AS t (session_id, epoch) VALUES (p_session, 1)
    ON CONFLICT (session_id) DO UPDATE SET epoch = t.epoch + 1
    RETURNING epoch INTO v_epoch;
    RETURN v_epoch;
END
$fn$;

-- append_events under a turn lock: refused (AK003, nothing written) unless p_epoch is the
-- session's current epoch and backend p_holder still holds the lock. The epoch row stays
-- share-locked until commit, so a new grant waits for this append to finish.
CREATE OR REPLACE FUNCTION {schema}.append_leased(
    p_session text, p_expected bigint, p_ids text[], p_bodies text[], p_epoch bigint, p_holder integer
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v_epoch bigint;
    v_key   bigint := {schema}.turn_key(p_session);
BEGIN
    SELECT epoch INTO v_epoch FROM {schema}.turn_epochs WHERE session_id = p_session FOR SHARE;
    IF v_epoch IS DISTINCT FROM p_epoch OR NOT EXISTS (
        SELECT 1 FROM pg_locks
         WHERE locktype = 'advisory' AND granted AND pid = p_holder AND objsubid = 1
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND classid::bigint = (v_key >> 32) & 4294967295 AND objid::bigint = v_key & 4294967295
    ) THEN
        RAISE EXCEPTION 'turn lock lost' USING ERRCODE = 'AK003', DETAIL = coalesce(v_epoch, 0)::text;
    END IF;
    RETURN {schema}.append_events(p_session, p_expected, p_ids, p_bodies);
END
$fn$;

INSERT INTO {schema}.meta (key, value) VALUES ('schema_version', '{version}')
ON CONFLICT (key) DO NOTHING;
-- the table layout: 1 before turn locks (an older database is upgraded by running this again)
INSERT INTO {schema}.meta AS m (key, value) VALUES ('layout', '{layout}')
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value WHERE m.value::int < EXCLUDED.value::int;

-- agentkit.ToolCache entries: read-only tools' results by key (a hash of the tool's name
-- and input); times are seconds since the epoch by this server's clock
CREATE TABLE IF NOT EXISTS {schema}.tool_cache (
    key        text PRIMARY KEY,
    tool_name  text NOT NULL,
    stored_at  double precision NOT NULL,
    expires_at double precision NOT NULL,
    output     text NOT NULL  -- the output as agentkit's strict JSON
);
"""


def check_schema_name(schema: object) -> str:
    """``schema``, or ConfigurationError: 1-40 characters from ``a-z 0-9 _``."""
    if not isinstance(schema, str) or not _SCHEMA_RE.fullmatch(schema):
        raise ConfigurationError(
            f"invalid schema name {schema!r}: use 1-40 characters from a-z 0-9 _ starting with a "
            f"letter or underscore (one schema per application, e.g. 'agentkit' or 'myapp_agents')"
        )
    return schema


def channel_name(schema: str) -> str:
    """The LISTEN/NOTIFY channel the stores of ``schema`` announce commits on."""
    return f"{schema}_events"


def schema_sql(schema: str = "agentkit") -> str:
    """The SQL :meth:`Pg.migrate` runs for ``schema`` (shown in docs/durability.md)."""
    check_schema_name(schema)
    return SCHEMA_SQL.format(
        schema=schema,
        channel=f"'{channel_name(schema)}'",
        key_prefix=f"'agentkit-turn/{schema}/'",
        version=SCHEMA_VERSION,
        layout=LAYOUT,
    )
