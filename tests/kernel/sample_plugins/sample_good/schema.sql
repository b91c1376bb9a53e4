-- schema-version: 1
CREATE TABLE IF NOT EXISTS good_notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);
