-- schema-version: 1
-- The notify plugin's tables: the notifications (the web list and the CLI read them), the
-- durable outbox of deliveries to each surface, web push subscriptions, per-user switches and
-- the surfaces ever registered.

-- One row per notification of one user. ref: the fan-out's de-duplication key
-- ("decision:12"), NULL for notifications made through the service without one.
CREATE TABLE IF NOT EXISTS notify_notifications (
    id          INTEGER PRIMARY KEY,
    user_id     INTEGER NOT NULL,
    kind        TEXT    NOT NULL,
    title       TEXT    NOT NULL,
    body        TEXT    NOT NULL DEFAULT '',
    url         TEXT,
    urgency     TEXT    NOT NULL DEFAULT 'normal' CHECK (urgency IN ('very-low', 'low', 'normal', 'high')),
    actions     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(actions)),
    ref         TEXT,
    created_at  TEXT    NOT NULL,           -- UTC ISO 8601
    read_at     TEXT
);
CREATE INDEX IF NOT EXISTS notify_notifications_user ON notify_notifications (user_id, id);
CREATE UNIQUE INDEX IF NOT EXISTS notify_notifications_ref ON notify_notifications (user_id, ref) WHERE ref IS NOT NULL;

-- The outbox: one row per (notification, surface, target). target: a push subscription's id
-- for surface 'push', '' for a platform surface. A row is 'pending' until the surface took it
-- ('delivered'), said the user has no address there ('skipped'), or the attempts or the
-- pending age ran out ('failed', last_error says why). next_at: UTC epoch seconds.
CREATE TABLE IF NOT EXISTS notify_deliveries (
    id               INTEGER PRIMARY KEY,
    notification_id  INTEGER NOT NULL REFERENCES notify_notifications (id) ON DELETE CASCADE,
    surface          TEXT    NOT NULL,
    target           TEXT    NOT NULL DEFAULT '',
    status           TEXT    NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'skipped', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_at          REAL    NOT NULL,
    last_error       TEXT,
    created_at       TEXT    NOT NULL,
    done_at          TEXT,
    UNIQUE (notification_id, surface, target)
);
CREATE INDEX IF NOT EXISTS notify_deliveries_due ON notify_deliveries (status, next_at);

-- Web push subscriptions (W3C Push API PushSubscription.toJSON()), per user and device.
CREATE TABLE IF NOT EXISTS notify_push_subscriptions (
    id          INTEGER PRIMARY KEY,
    user_id     INTEGER NOT NULL,
    endpoint    TEXT    NOT NULL UNIQUE,
    p256dh      TEXT    NOT NULL,
    auth        TEXT    NOT NULL,
    device      TEXT    NOT NULL DEFAULT '',
    created_at  TEXT    NOT NULL,
    last_ok_at  TEXT
);
CREATE INDEX IF NOT EXISTS notify_push_subscriptions_user ON notify_push_subscriptions (user_id);

-- Switches: a row turns kind × surface off (enabled 0) or on; surface '*' is every surface.
-- No row: on.
CREATE TABLE IF NOT EXISTS notify_prefs (
    user_id  INTEGER NOT NULL,
    kind     TEXT    NOT NULL,
    surface  TEXT    NOT NULL,
    enabled  INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    PRIMARY KEY (user_id, kind, surface)
) WITHOUT ROWID;

-- Every platform surface that ever registered: new notifications get a pending delivery for
-- each, even while it is down, so it catches up when it comes back.
CREATE TABLE IF NOT EXISTS notify_surfaces (
    name        TEXT PRIMARY KEY,
    first_seen  TEXT NOT NULL,
    last_seen   TEXT NOT NULL
) WITHOUT ROWID;
