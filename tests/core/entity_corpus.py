"""A labelled set of key entities: realistic content and what a summary of it must keep.

Each entry is a text and every entity in it that matters, by the rules of
``contextview.core.entities``: identifiers and codes, numbers with units,
status codes in context, dates, emails, URLs, paths, addresses and error names.
Line numbers, bare decimals, versions, tool-call ids and string literals of
code are not labelled: a summary that drops them lost nothing.
"""

from __future__ import annotations

LABELLED: list[tuple[str, list[str]]] = [
    # chat, Chinese
    (
        "我的订单 SO20260101007 三天没动了，会员号 A12345，能帮我查一下吗？"
        "另外 SO20260101042 的地址写错了，请改成上海市浦东新区。",
        ["SO20260101007", "A12345", "SO20260101042"],
    ),
    (
        "用户反馈：2026-01-15 下单后一直显示“待发货”，客服工单 TK-88231 已超过 48h 未处理，"
        "退款金额 ¥1299，联系邮箱 li.wei@example.cn。",
        ["2026-01-15", "待发货", "TK-88231", "48h", "¥1299", "li.wei@example.cn"],
    ),
    (
        "请按照下面要求回答：用表格列出异常订单，最多 20 条，每条不超过 50 字，"
        "时间范围 1 月 1 日到 1 月 15 日。",
        ["20 条", "50 字", "1 月 1 日", "1 月 15 日"],
    ),
    (
        "订单服务返回 502，网关日志显示上游 inventory-svc 超时 3 秒，重试 2 次后失败，"
        "错误码 ERR_INVENTORY_LOCK，影响约 20 万用户。",
        ["502", "inventory-svc", "3 秒", "2 次", "ERR_INVENTORY_LOCK", "20 万"],
    ),
    # chat, English
    (
        "Hi, order #48213 still hasn't shipped. My account is acct_7731x and the "
        "invoice INV-2026-0042 says $249.99. Can you check by Friday 17:00?",
        ["48213", "acct_7731x", "INV-2026-0042", "$249.99", "17:00"],
    ),
    (
        'The user said "answer in a table" and asked to keep the error code E1001; '
        "reply to ops@shop.example before 2026-02-01.",
        ["answer in a table", "E1001", "ops@shop.example", "2026-02-01"],
    ),
    (
        "Can you look at https://github.com/acme/shop/issues/512 and the runbook at "
        "https://wiki.acme.dev/runbooks/payments? The outage lasted 45 minutes.",
        [
            "https://github.com/acme/shop/issues/512",
            "https://wiki.acme.dev/runbooks/payments",
            "45 minutes",
        ],
    ),
    # logs
    (
        '10.0.3.7 - - [01/Jan/2026:10:23:11 +0800] "GET /api/orders/SO20260101007 HTTP/1.1" 200 '
        "512 0.203\n"
        '10.0.3.9 - - [01/Jan/2026:10:23:14 +0800] "POST /api/inventory/lock HTTP/1.1" 504 '
        "0 3.002\n"
        '10.0.3.9 - - [01/Jan/2026:10:23:19 +0800] "GET /healthz HTTP/1.1" 200 2 0.001',
        [
            "10.0.3.7",
            "01/Jan/2026",
            "/api/orders/SO20260101007",
            "SO20260101007",
            "200",
            "10.0.3.9",
            "/api/inventory/lock",
            "504",
        ],
    ),
    (
        "2026-01-15T10:00:03Z ERROR payment-worker-3 charge failed: StripeTimeoutError after 30s "
        "(request_id=req_9f8e7d6c5b, amount=4200 cents)\n"
        "2026-01-15T10:00:04Z WARN  retry 1/3 scheduled in 500ms for job J-20260115-0007",
        [
            "2026-01-15T10:00:03Z",
            "payment-worker-3",
            "StripeTimeoutError",
            "30s",
            "req_9f8e7d6c5b",
            "4200 cents",
            "2026-01-15T10:00:04Z",
            "500ms",
            "J-20260115-0007",
        ],
    ),
    (
        "Jan 15 10:02:11 db-primary-01 postgres[2231]: FATAL: remaining connection slots are "
        "reserved; max_connections=200 reached, 3 clients refused (SQLSTATE 53300)\n"
        "Jan 15 10:02:12 db-primary-01 kernel: Out of memory: Killed process 2231 (postgres) "
        "total-vm:8388608kB",
        ["10:02:11", "db-primary-01", "3 clients", "53300", "10:02:12", "8388608kB"],
    ),
    (
        "upstream timed out (110: Connection timed out) while reading response header from "
        'upstream, client: 10.0.0.7, server: shop, upstream: "http://inventory-svc:8080/lock", '
        "status 504 after 3 s",
        ["110", "10.0.0.7", "http://inventory-svc:8080/lock", "status 504", "3 s"],
    ),
    (
        "[2026-01-15 10:05:00] kafka consumer group orders-cg-2 lag 18,000 messages on topic "
        "orders.v2 partition 7; broker b-2.kafka.internal:9092 ECONNREFUSED",
        [
            "2026-01-15",
            "10:05:00",
            "orders-cg-2",
            "18,000 messages",
            "orders.v2",
            "b-2.kafka.internal:9092",
            "ECONNREFUSED",
        ],
    ),
    # code, as the Read tool shows it
    (
        "   101→def lock_inventory(order_id: str, timeout: float = 0.5) -> bool:\n"
        '   102→    """Lock stock for an order; raises InventoryLockError."""\n'
        '   103→    url = f"{settings.INVENTORY_URL}/lock"\n'
        '   104→    resp = session.post(url, json={"order": order_id}, timeout=timeout)\n'
        "   105→    if resp.status_code == 409:\n"
        '   106→        raise InventoryLockError("already locked")\n'
        '   107→    logger.info("locked %s", order_id)\n'
        "   108→    return resp.ok",
        ["InventoryLockError", "INVENTORY_URL", "409"],
    ),
    (
        "     1→import os\n"
        '     2→DATABASE_URL = os.environ.get("DATABASE_URL", "postgres://localhost/shop")\n'
        '     3→REDIS_URL = "redis://cache-01:6379/2"\n'
        "     4→MAX_RETRIES = 3\n"
        '     5→LOG_PATH = "/var/log/shop/app.log"\n',
        [
            "DATABASE_URL",
            "postgres://localhost/shop",
            "REDIS_URL",
            "redis://cache-01:6379/2",
            "cache-01",
            "MAX_RETRIES",
            "LOG_PATH",
            "/var/log/shop/app.log",
        ],
    ),
    (
        "src/orders/service.py:88:    raise OrderNotFound(order_id)\n"
        "src/orders/views.py:142:        return JsonResponse({'error': 'not found'}, status=404)\n"
        "tests/orders/test_service.py:17:def test_lock_times_out():",
        [
            "src/orders/service.py",
            "OrderNotFound",
            "src/orders/views.py",
            "status=404",
            "tests/orders/test_service.py",
        ],
    ),
    (
        "Traceback (most recent call last):\n"
        '  File "/srv/shop/orders/service.py", line 88, in lock\n'
        "    raise InventoryLockError(order_id)\n"
        "orders.errors.InventoryLockError: SO20260101007 locked by worker-7 for 120s",
        [
            "/srv/shop/orders/service.py",
            "InventoryLockError",
            "SO20260101007",
            "worker-7",
            "120s",
        ],
    ),
    (
        "$ pip install requests==2.31.0 && pytest tests/api -q\n"
        "FAILED tests/api/test_orders.py::test_refund - AssertionError: 500 != 201\n"
        "1 failed, 48 passed in 12.5s",
        ["tests/api", "tests/api/test_orders.py", "AssertionError", "500", "201", "12.5s"],
    ),
    # JSON tool results
    (
        '{"total": 128, "list": [{"order_id": "SO20260101007", "status": "stuck", '
        '"hours": "48h", "updated_at": "2026-01-14T08:00:00Z"}, {"order_id": "SO20260101042", '
        '"status": "address_error", "amount": "¥389"}]}',
        ["SO20260101007", "48h", "2026-01-14T08:00:00Z", "SO20260101042", "address_error", "¥389"],
    ),
    (
        '{"id": "cus_Nf83kd02", "email": "buyer@example.com", "plan": "pro", '
        '"quota": "2 GiB", "region": "eu-west-1", "created": "2025-11-03"}',
        ["cus_Nf83kd02", "buyer@example.com", "2 GiB", "eu-west-1", "2025-11-03"],
    ),
    (
        '{"error": {"type": "rate_limit_error", "code": "ERR_RATE_LIMIT", "message": '
        '"limit of 60 requests per minute exceeded", "retry_after": "20s", "status": 429}}',
        ["rate_limit_error", "ERR_RATE_LIMIT", "60 requests", "20s", "429"],
    ),
    (
        '{"tool_use_id": "toolu_01A9xQe7", "type": "tool_result", "content": '
        '"deploy d41f9e2 to prod-eu-2 finished in 4 min, 12 pods"}',
        ["d41f9e2", "prod-eu-2", "4 min", "12 pods"],
    ),
    # agent notes and summaries
    (
        "Plan: 1. read the nginx log 2. find the 504s 3. check inventory-svc. Found: "
        "/api/inventory/lock times out at 3 s since deploy 7c2e91ab; rollback ticket OPS-1288.",
        ["inventory-svc", "/api/inventory/lock", "3 s", "7c2e91ab", "OPS-1288"],
    ),
    (
        "摘要：异常订单 SO20260101007（物流停滞超 48h）、"
        "SO20260101103（支付失败，错误码 PAY_DECLINED）。"
        "日志见 /data/logs/2026-01-15/pay.log，待办：联系 A12345。",
        [
            "SO20260101007",
            "48h",
            "SO20260101103",
            "PAY_DECLINED",
            "/data/logs/2026-01-15/pay.log",
            "A12345",
        ],
    ),
    (
        "Upgraded node from 18.19.0 to 20.11.1 and numpy 1.26.4; benchmark went from 0.82 to "
        "0.64 (ratio 1.28) with p99 latency 240ms and 1.5k qps on m5.xlarge.",
        ["240ms", "1.5k", "m5.xlarge"],
    ),
    (
        "Called toolu_01XyZ9abcdef and call_aBc123XyZ789 to fetch report_2026_q1.csv "
        "from s3://acme-reports/2026/q1/report_2026_q1.csv (18 MB).",
        ["report_2026_q1.csv", "s3://acme-reports/2026/q1/report_2026_q1.csv", "18 MB"],
    ),
    (
        "记住：用户要求用中文回答，预算 16,000 tokens，保留 tool_result_32 的原文，"
        "文件在 C:\\Users\\li\\Desktop\\订单.xlsx，截止 2026 年 1 月 20 日。",
        [
            "16,000 tokens",
            "tool_result_32",
            "C:\\Users\\li\\Desktop\\订单.xlsx",
            "2026 年 1 月 20 日",
        ],
    ),
    (
        "config: retries 3, backoff 0.25, timeout 30 s, pool 10, version 3.4.2, "
        "endpoint https://api.acme.dev/v2/orders, key id AKIA4EXAMPLE7Q.",
        ["30 s", "https://api.acme.dev/v2/orders", "AKIA4EXAMPLE7Q"],
    ),
    (
        "The refund for order 77120 failed with HTTP 502 twice, then TimeoutError; "
        "user jane.doe+shop@gmail.com wants an answer in 24 hours. See PR #931.",
        ["77120", "HTTP 502", "TimeoutError", "jane.doe+shop@gmail.com", "24 hours", "931"],
    ),
    (
        "docker logs api-7f9c | tail -n 50 shows OOMKilled at 14:32:07, memory 512Mi limit, "
        "container image registry.acme.dev/shop/api:sha-91be3f0.",
        ["api-7f9c", "OOMKilled", "14:32:07", "512Mi", "registry.acme.dev/shop/api", "sha-91be3f0"],
    ),
    (
        "<system-reminder>Todo: [in_progress] fix SO20260101007 lock; [pending] reply to "
        "A12345</system-reminder> The file ./src/orders/lock.py has 2 TODOs and uses "
        "LOCK_TTL_SECONDS; ran `make test-orders` twice.",
        [
            "SO20260101007",
            "A12345",
            "./src/orders/lock.py",
            "LOCK_TTL_SECONDS",
            "make test-orders",
        ],
    ),
    (
        "库存服务 inventory-svc 在 10:23:14 返回 504，耗时 3002 毫秒；另一台 10.0.3.12 正常，"
        "状态码 200，CPU 占用 85%，内存 3.2 GB。",
        [
            "inventory-svc",
            "10:23:14",
            "504",
            "3002 毫秒",
            "10.0.3.12",
            "状态码 200",
            "85%",
            "3.2 GB",
        ],
    ),
    (
        "ticket 20231 reopened; the customer C-0042 paid € 18.50 via IBAN DE89370400440532013000 "
        "on 2026/01/12 and got receipt RCPT_55121.",
        ["20231", "C-0042", "€ 18.50", "DE89370400440532013000", "2026/01/12", "RCPT_55121"],
    ),
    # more chat, tasks and tool output
    (
        "帮我把 2026 年 1 月的退款报表导出成 refunds_2026_01.xlsx，发到 finance@acme.cn，"
        "金额超过 ¥5000 的单独标红，另外 RF20260113009 和 RF20260117021 需要人工复核。",
        [
            "2026 年 1 月",
            "refunds_2026_01.xlsx",
            "finance@acme.cn",
            "¥5000",
            "RF20260113009",
            "RF20260117021",
        ],
    ),
    (
        "Task: migrate the users table (about 2.4M rows) to the new cluster pg-eu-3 without "
        "more than 5 minutes of downtime; keep a backup in /backups/users-2026-01-20.dump.",
        ["2.4M", "pg-eu-3", "5 minutes", "/backups/users-2026-01-20.dump"],
    ),
    (
        "kubectl get pods -n shop\n"
        "NAME                      READY   STATUS             RESTARTS   AGE\n"
        "api-7f9c-x2k8p            0/1     CrashLoopBackOff   14         37m\n"
        "worker-5d6b-q9zzt         1/1     Running            0          2d",
        ["api-7f9c-x2k8p", "CrashLoopBackOff", "37m", "worker-5d6b-q9zzt", "2d"],
    ),
    (
        '{"order_id": "SO20260101103", "payment": {"provider": "alipay", "trade_no": '
        '"2026011522001400001234567890", "error_code": "ACQ.TRADE_HAS_CLOSE", "paid": "¥0"}, '
        '"updated": "2026-01-15 10:42:17"}',
        [
            "SO20260101103",
            "2026011522001400001234567890",
            "ACQ.TRADE_HAS_CLOSE",
            "¥0",
            "2026-01-15",
            "10:42:17",
        ],
    ),
    (
        "客户 王女士（手机尾号 8812）说 12 月 30 日买的耳机 SKU-A7731 有杂音，"
        "想换货不退款，物流单号 SF1402938827361，已等了 6 天。",
        ["8812", "12 月 30 日", "SKU-A7731", "SF1402938827361", "6 天"],
    ),
    (
        "git log --oneline -3\n"
        "9fceb02 Fix lock timeout for SO orders (#1204)\n"
        "c3a91e7 Bump deps to 4.2.1\n"
        "a0d47b5 Add retry to inventory client",
        ["9fceb02", "1204", "c3a91e7", "a0d47b5"],
    ),
    (
        "Reminder from the user: never email customers directly, only via support@acme.com; "
        "the SLA for P1 incidents is 30 min and INC-40217 is still open since 09:15.",
        ["support@acme.com", "30 min", "INC-40217", "09:15"],
    ),
    (
        '  File "/usr/lib/python3.12/json/decoder.py", line 355, in raw_decode\n'
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n"
        "while parsing /tmp/resp_8812.json (0 bytes)",
        [
            "/usr/lib/python3.12/json/decoder.py",
            "JSONDecodeError",
            "/tmp/resp_8812.json",
            "0 bytes",
        ],
    ),
    # code as a coding agent reads it: a test with fixtures, a template with styles,
    # a terminal's colours
    (
        '    46→  test "extracts tool names" do\n'
        '    47→    blocks = [%{"type" => "text", "text" => "Let me check."},\n'
        '    48→      %{"type" => "tool_use", "id" => "toolu_123", "name" => "Read"}]\n'
        '    49→    assert result =~ "Checking the lock"\n'
        "    50→    # regression for ORD-5521: lock held 90s on /srv/orders/lock.ex\n"
        '    51→    refute log =~ "ERR_LOCK_TIMEOUT"',
        ["ORD-5521", "90s", "/srv/orders/lock.ex", "ERR_LOCK_TIMEOUT"],
    ),
    (
        '<span style="color: #888; width:8px; border-radius:50%">{@order_id}</span>\n'
        '<div style="height: calc(100vh - 50px)">Order SO20260101042 held for 48h</div>\n'
        "console.log(`retry ${n}`) // see https://status.acme.dev/incidents/7731",
        ["SO20260101042", "48h", "https://status.acme.dev/incidents/7731"],
    ),
    (
        "\x1b[31merror\x1b[0m: deploy api-7f9c failed after 3 retries (exit 137)\n"
        "\x1b[1mhint\x1b[22m: raise memory above 512Mi in k8s/api/deployment.yaml",
        ["api-7f9c", "512Mi", "k8s/api/deployment.yaml"],
    ),
]
