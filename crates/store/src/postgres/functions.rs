//! PostgreSQL's server-side functions, as the migrations that made them: the
//! kernel's sends written in one statement (`crates/kernel/src/messaging/one.rs`
//! decides them; these write them).

/// Migration 19 (replaced by 20): a send in one statement: `channel_send` writes, in the caller's transaction, a
/// message whose recipients, deliveries, hop count and cursor move the kernel
/// decided (`crates/kernel/src/messaging/one.rs`, where the rules live), given the
/// instance's agents it decided them against. It reads the agents, and when they
/// are not those (`p_agents`, the names in order joined by commas, which no name
/// holds; an agent came or went since the kernel last read them) it writes nothing
/// and returns them the same way in a `stale` row, so the kernel decides again. Otherwise it allocates the message's id above the instance's
/// greatest (under the instance's write lock, so ids stay in order with several
/// nodes writing to it; the kernel's UUIDv7 is kept when it is already above),
/// runs the send guard's scan (the kernel's `missed_sql`, with `p_guard`), writes
/// the message, its deliveries (`p_deliver`, a JSON list of names), its broadcast
/// row, the hop count (`p_hops`: 0 leaves it, 1 adds one, -1 resets it) and the
/// sender's cursor (`p_cursor`), and returns a `sent` row with the id then the
/// scan's rows (`missed`: id, sender, the text's start), newest first. Before it
/// `message_id_after`, the smallest UUID above one (a successor in byte order).
/// Inside, three statements: the agents and the greatest id, the id and the scan,
/// the writes as one statement.
pub(super) const SEND_ONE: &str = r#"
CREATE FUNCTION message_id_after(top TEXT) RETURNS TEXT
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    digits CONSTANT TEXT := '0123456789abcdef';
    hex TEXT := replace(top, '-', '');
    i INT := 32;
    d INT;
BEGIN
    IF top !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RETURN top || '0';
    END IF;
    WHILE i > 0 LOOP
        d := position(substr(hex, i, 1) IN digits);
        IF d < 16 THEN
            hex := overlay(hex PLACING substr(digits, d + 1, 1) FROM i FOR 1);
            EXIT;
        END IF;
        hex := overlay(hex PLACING '0' FROM i FOR 1);
        i := i - 1;
    END LOOP;
    RETURN substr(hex, 1, 8) || '-' || substr(hex, 9, 4) || '-' || substr(hex, 13, 4) || '-'
        || substr(hex, 17, 4) || '-' || substr(hex, 21, 12);
END $$;

CREATE FUNCTION channel_send(
    p_wid BIGINT, p_agents TEXT, p_candidate TEXT, p_sender TEXT, p_content TEXT, p_kind TEXT,
    p_to TEXT, p_mentions TEXT, p_priority TEXT, p_now BIGINT, p_deliver TEXT,
    p_broadcast BOOLEAN, p_hops BIGINT, p_cursor BOOLEAN, p_guard BOOLEAN)
    RETURNS TABLE (o_tag TEXT, o_id TEXT, o_from TEXT, o_text TEXT)
    LANGUAGE plpgsql AS $$
DECLARE
    v_agents TEXT;
    v_top TEXT;
    v_id TEXT;
BEGIN
    SELECT COALESCE((SELECT string_agg(a.name::text, ',' ORDER BY a.name) FROM agents a
                      WHERE a.workflow_id = p_wid), ''),
           (SELECT max(m.id) FROM messages m WHERE m.workflow_id = p_wid)
      INTO v_agents, v_top;
    IF v_agents IS DISTINCT FROM p_agents THEN
        RETURN QUERY SELECT 'stale', NULL::text, NULL::text, v_agents;
        RETURN;
    END IF;
    v_id := CASE WHEN v_top IS NULL OR p_candidate COLLATE "C" > v_top COLLATE "C"
                 THEN p_candidate ELSE message_id_after(v_top) END;
    RETURN QUERY
    SELECT 'sent', v_id, NULL::text, NULL::text
    UNION ALL
    (SELECT 'missed', m.id::text, m.sender, substr(m.content, 1, 161) FROM messages m
      WHERE p_guard AND m.workflow_id = p_wid AND m.id < v_id AND m.sender <> p_sender
        AND m.id > COALESCE((SELECT r.last_read FROM read_cursors r
                              WHERE r.workflow_id = p_wid AND r.reader = p_sender), '')
        AND (m.to_member IS NULL OR (m.to_member = p_sender AND m.created_at >= COALESCE(
            (SELECT a.created_at FROM agents a WHERE a.workflow_id = p_wid AND a.name = p_sender), 0))
            OR (p_sender = 'user' AND m.sender LIKE 'hook:%'))
        AND (instr(m.mentions, '"' || p_sender || '"') = 0 OR (
            NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.workflow_id = m.workflow_id AND d.recipient = p_sender
                        AND d.message_id = m.id AND d.state <> 'pending' LIMIT 1 OFFSET 0)
            AND NOT EXISTS (SELECT 1 FROM deliveries_done d WHERE d.workflow_id = m.workflow_id
                        AND d.recipient = p_sender AND d.message_id = m.id LIMIT 1 OFFSET 0)))
      ORDER BY m.id DESC LIMIT 100);
    WITH message AS (
        INSERT INTO messages (workflow_id, id, sender, content, kind, to_member, mentions, priority, created_at)
        VALUES (p_wid, v_id, p_sender, p_content, p_kind, p_to, p_mentions, p_priority, p_now)
    ), delivered AS (
        INSERT INTO deliveries (workflow_id, recipient, message_id, state, updated_at)
        SELECT p_wid, r, v_id, 'pending', p_now FROM json_array_elements_text(p_deliver::json) r
    ), broadcast AS (
        INSERT INTO broadcasts (workflow_id, message_id, sender) SELECT p_wid, v_id, p_sender WHERE p_broadcast
    ), hop AS (
        UPDATE workflows SET hops = CASE WHEN p_hops < 0 THEN 0 ELSE hops + p_hops END
         WHERE id = p_wid AND CASE WHEN p_hops < 0 THEN hops <> 0 ELSE p_hops > 0 END
    )
    INSERT INTO read_cursors (workflow_id, reader, last_read) SELECT p_wid, p_sender, v_id WHERE p_cursor
    ON CONFLICT (workflow_id, reader) DO UPDATE SET last_read =
        CASE WHEN excluded.last_read > read_cursors.last_read THEN excluded.last_read
             ELSE read_cursors.last_read END;
END $$;
"#;

/// Migration 20: the sends of one instance that a job carries, in one statement,
/// in place of 19's one send per statement (kept: a node of the version before
/// may still be running while the others upgrade, and calls it).
///
/// `channel_send_many(p_wid, p_agents, p_sends, p_hops_reset, p_hops_add)`:
/// `p_agents` as in 19 (when they are not the instance's, nothing is written and a
/// `stale` row answers with them); `p_sends` a JSON list, in the order the sends
/// were made, of objects with the message's candidate id `c`, sender `s`, text
/// `t`, kind `k`, addressee `o`, mentions `m`, priority `p`, time `n`, the
/// deliveries `d` (a list of names), whether it is a broadcast `b`, moves its
/// sender's cursor `r` and runs the guard `g`, and `a`: the position (from 1) of
/// the latest send before it of the same sender that moved the cursor, 0 if none.
/// The hop count is set to `p_hops_add` when `p_hops_reset`, else raised by it.
///
/// Ids are allocated in order, each above the one before and the instance's
/// greatest. The messages, deliveries and broadcast rows are written first; each
/// send's guard scan (migration 19's, with its cursor moved past `a`'s message, as
/// it would be had the sends been written one by one) reads only messages below
/// its own id, so it sees the sends before it and none after; then the cursors and
/// the hop count. Answers: a `sent` row per send (its position `o_i`, its id),
/// then its scan's `missed` rows, newest first.
pub(super) const SEND_MANY: &str = r#"
CREATE FUNCTION channel_send_many(
    p_wid BIGINT, p_agents TEXT, p_sends TEXT, p_hops_reset BOOLEAN, p_hops_add BIGINT)
    RETURNS TABLE (o_i BIGINT, o_tag TEXT, o_id TEXT, o_from TEXT, o_text TEXT)
    LANGUAGE plpgsql AS $$
DECLARE
    v_agents TEXT;
    v_top TEXT;
    v_ids TEXT[] := '{}';
    v_c TEXT;
BEGIN
    SELECT COALESCE((SELECT string_agg(a.name::text, ',' ORDER BY a.name) FROM agents a
                      WHERE a.workflow_id = p_wid), ''),
           (SELECT max(m.id) FROM messages m WHERE m.workflow_id = p_wid)
      INTO v_agents, v_top;
    IF v_agents IS DISTINCT FROM p_agents THEN
        RETURN QUERY SELECT 0::bigint, 'stale', NULL::text, NULL::text, v_agents;
        RETURN;
    END IF;
    FOR v_c IN SELECT e->>'c' FROM json_array_elements(p_sends::json) WITH ORDINALITY AS x(e, n)
                ORDER BY n LOOP
        v_top := CASE WHEN v_top IS NULL OR v_c COLLATE "C" > v_top COLLATE "C"
                      THEN v_c ELSE message_id_after(v_top) END;
        v_ids := v_ids || v_top;
    END LOOP;
    WITH u AS (
        SELECT v_ids[u.i] AS id, u.* FROM json_to_recordset(p_sends::json)
            AS u(s TEXT, t TEXT, k TEXT, o TEXT, m TEXT, p TEXT, n BIGINT, d JSON, b BOOLEAN, i INT)
    ), message AS (
        INSERT INTO messages (workflow_id, id, sender, content, kind, to_member, mentions, priority, created_at)
        SELECT p_wid, u.id, u.s, u.t, u.k, u.o, u.m, u.p, u.n FROM u
    ), delivered AS (
        INSERT INTO deliveries (workflow_id, recipient, message_id, state, updated_at)
        SELECT p_wid, r, u.id, 'pending', u.n FROM u, json_array_elements_text(u.d) r
    )
    INSERT INTO broadcasts (workflow_id, message_id, sender) SELECT p_wid, u.id, u.s FROM u WHERE u.b;
    RETURN QUERY
    SELECT x.i::bigint, x.tag, x.id, x.sender, x.text FROM (
        SELECT i AS i, 'sent' AS tag, v_ids[i] AS id, NULL::text AS sender, NULL::text AS text
          FROM generate_subscripts(v_ids, 1) i
        UNION ALL
        SELECT u.i, 'missed', g.id, g.sender, g.text
          FROM json_to_recordset(p_sends::json) AS u(s TEXT, g BOOLEAN, a INT, i INT)
          CROSS JOIN LATERAL (
            SELECT m.id::text AS id, m.sender, substr(m.content, 1, 161) AS text FROM messages m
             WHERE u.g AND m.id > COALESCE(v_ids[u.a], '') AND m.workflow_id = p_wid AND m.id < v_ids[u.i] AND m.sender <> u.s
               AND m.id > COALESCE((SELECT r.last_read FROM read_cursors r
                                     WHERE r.workflow_id = p_wid AND r.reader = u.s), '')
               AND (m.to_member IS NULL OR (m.to_member = u.s AND m.created_at >= COALESCE(
                   (SELECT a.created_at FROM agents a WHERE a.workflow_id = p_wid AND a.name = u.s), 0))
                   OR (u.s = 'user' AND m.sender LIKE 'hook:%'))
               AND (instr(m.mentions, '"' || u.s || '"') = 0 OR (
                   NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.workflow_id = m.workflow_id AND d.recipient = u.s
                               AND d.message_id = m.id AND d.state <> 'pending' LIMIT 1 OFFSET 0)
                   AND NOT EXISTS (SELECT 1 FROM deliveries_done d WHERE d.workflow_id = m.workflow_id
                               AND d.recipient = u.s AND d.message_id = m.id LIMIT 1 OFFSET 0)))
             ORDER BY m.id DESC LIMIT 100) g
    ) x ORDER BY x.i, x.tag = 'sent' DESC, x.id COLLATE "C" DESC;
    WITH hop AS (
        UPDATE workflows SET hops = CASE WHEN p_hops_reset THEN p_hops_add ELSE hops + p_hops_add END
         WHERE id = p_wid AND CASE WHEN p_hops_reset THEN hops <> p_hops_add ELSE p_hops_add > 0 END
    )
    INSERT INTO read_cursors (workflow_id, reader, last_read)
    SELECT DISTINCT ON (u.s) p_wid, u.s, v_ids[u.i]
      FROM json_to_recordset(p_sends::json) AS u(s TEXT, r BOOLEAN, i INT)
     WHERE u.r ORDER BY u.s, u.i DESC
    ON CONFLICT (workflow_id, reader) DO UPDATE SET last_read =
        CASE WHEN excluded.last_read > read_cursors.last_read THEN excluded.last_read
             ELSE read_cursors.last_read END;
END $$;
"#;
