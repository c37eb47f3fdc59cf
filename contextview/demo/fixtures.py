"""Tool outputs for the demo sessions: logs, configs, query results, documents.

Everything is generated from fixed seeds, so the same call always returns the
same text. The content is made to look like what an agent really reads (nginx
combined logs, Spring Boot logs, a paged order API) because the point of the
demo is to show what a summary keeps and loses from such text.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

CST = timezone(timedelta(hours=8))

# ---------------------------------------------------------------- seed 000: nginx

INCIDENT_ORDER = "SO20260101007"
UPSTREAM = "10.42.3.55:8081"
_UAS = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120.0.0.0 Safari/537.36",
    "okhttp/4.12.0",
    "ShopApp/5.8.1 (Android 14; Pixel 7)",
)


def nginx_access_log() -> tuple[str, dict[str, Any]]:
    """Sixty lines of /var/log/nginx/access.log around the incident, and their tallies."""
    rng = random.Random("access-log")
    moment = datetime(2026, 1, 1, 10, 20, 3, tzinfo=CST)
    lines: list[str] = []
    timeouts: dict[str, int] = {}
    for n in range(60):
        moment += timedelta(seconds=rng.randint(3, 12))
        ip = f"10.42.{rng.choice((7, 7, 9, 12))}.{rng.randint(10, 250)}"
        roll = rng.random()
        late = moment.minute >= 22
        if roll < 0.34 or n in (17, 23, 31, 38, 44, 52):
            order = (
                INCIDENT_ORDER
                if n in (17, 23, 31, 38, 44, 52)
                else (f"SO20260101{rng.randint(8, 128):03d}")
            )
            path = f"/api/v1/orders/{order}/checkout"
            method, referer = "POST", "https://shop.example.com/checkout"
            if late and (order == INCIDENT_ORDER or rng.random() < 0.55):
                status, size, urt = 504, 167, 3.0 + rng.randint(0, 4) / 1000
                timeouts[order] = timeouts.get(order, 0) + 1
            else:
                status, size, urt = 200, rng.randint(380, 520), rng.randint(180, 940) / 1000
            upstream = UPSTREAM if rng.random() < 0.6 else "10.42.3.56:8081"
        elif roll < 0.6:
            path = f"/api/v1/products/SKU-{rng.randint(10000, 99999)}"
            method, referer = "GET", "https://shop.example.com/"
            status, size, urt = 200, rng.randint(1800, 5200), rng.randint(8, 60) / 1000
            upstream = "10.42.5.21:8080"
        elif roll < 0.85:
            path = "/api/v1/cart" if rng.random() < 0.5 else "/api/v1/cart/items"
            method = "GET" if path.endswith("cart") else "POST"
            referer = "https://shop.example.com/cart"
            status, size, urt = 200, rng.randint(300, 900), rng.randint(12, 90) / 1000
            upstream = "10.42.5.22:8080"
        else:
            path, method, referer = "/healthz", "GET", "-"
            status, size, urt = 200, 2, 0.001
            upstream = "-"
        stamp = moment.strftime("%d/%b/%Y:%H:%M:%S +0800")
        ua = rng.choice(_UAS) if referer != "-" else "kube-probe/1.29"
        rt = urt + rng.randint(0, 3) / 1000
        lines.append(
            f'{ip} - - [{stamp}] "{method} {path} HTTP/1.1" {status} {size} "{referer}" '
            f'"{ua}" rt={rt:.3f} uct=0.001 urt={urt:.3f} ups={upstream}'
        )
    stats = {
        "lines": len(lines),
        "timeouts": timeouts,
        "total_504": sum(timeouts.values()),
        "first": lines[0].split("[")[1].split("]")[0],
        "last": lines[-1].split("[")[1].split("]")[0],
    }
    return "\n".join(lines), stats


def nginx_error_grep() -> str:
    """`grep -n "upstream timed out" /var/log/nginx/error.log` during the incident."""
    rng = random.Random("error-log")
    moment = datetime(2026, 1, 1, 10, 22, 1, tzinfo=CST)
    lineno = 48211
    out = []
    orders = [INCIDENT_ORDER, "SO20260101019", INCIDENT_ORDER, "SO20260101031", INCIDENT_ORDER]
    for n in range(16):
        moment += timedelta(seconds=rng.randint(9, 31))
        lineno += rng.randint(2, 40)
        order = orders[n % len(orders)]
        upstream = UPSTREAM if n % 3 else "10.42.3.56:8081"
        out.append(
            f"{lineno}:{moment:%Y/%m/%d %H:%M:%S} [error] 2817#2817: *{91542 + n * 37} "
            "upstream timed out (110: Connection timed out) while reading response header "
            f"from upstream, client: 10.42.7.{rng.randint(10, 250)}, server: api.shop.example.com, "
            f'request: "POST /api/v1/orders/{order}/checkout HTTP/1.1", '
            f'upstream: "http://{upstream}/v2/reservations?order={order}", '
            'host: "api.shop.example.com"'
        )
    return "\n".join(out)


NGINX_CONF_GREP = """\
/etc/nginx/conf.d/upstreams.conf:12:upstream inventory_svc {
/etc/nginx/conf.d/upstreams.conf:13:    server 10.42.3.55:8081 max_fails=3 fail_timeout=10s;
/etc/nginx/conf.d/upstreams.conf:14:    server 10.42.3.56:8081 max_fails=3 fail_timeout=10s;
/etc/nginx/conf.d/upstreams.conf:15:    keepalive 32;
/etc/nginx/conf.d/api.conf:38:    # reserve-first: reserve stock before the order service charges
/etc/nginx/conf.d/api.conf:39:    location ~ ^/api/v1/orders/(?<oid>SO\\d+)/checkout$ {
/etc/nginx/conf.d/api.conf:40:        proxy_pass http://inventory_svc/v2/reservations?order=$oid;
/etc/nginx/conf.d/api.conf:41:        proxy_connect_timeout 1s;
/etc/nginx/conf.d/api.conf:42:        proxy_read_timeout 3s;
/etc/nginx/conf.d/api.conf:43:        proxy_next_upstream off;  # not idempotent
/etc/nginx/conf.d/api.conf:57:    location /inventory/ { proxy_pass http://inventory_svc; }"""


def inventory_pod_logs() -> str:
    """`kubectl logs deploy/inventory-svc -n shop --since=15m`, Spring Boot style."""
    rng = random.Random("inventory-logs")
    moment = datetime(2026, 1, 1, 2, 19, 40, 118000, tzinfo=UTC)
    out = []
    for n in range(34):
        moment += timedelta(milliseconds=rng.randint(900, 9000))
        stamp = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        thread = f"nio-8081-exec-{rng.randint(1, 48)}"
        order = INCIDENT_ORDER if n % 5 == 2 else f"SO20260101{rng.randint(8, 128):03d}"
        if n < 6:
            took = rng.randint(40, 180)
            out.append(
                f"{stamp}  INFO 1 --- [{thread}] c.s.inventory.ReservationController : "
                f"reserve order={order} sku=SKU-{rng.randint(10000, 99999)} qty=1 took {took} ms"
            )
        elif n % 4 == 1:
            out.append(
                f"{stamp} ERROR 1 --- [{thread}] o.h.engine.jdbc.spi.SqlExceptionHelper : "
                "HikariPool-1 - Connection is not available, request timed out after 2900ms "
                f"(total=20, active=20, idle=0, waiting={rng.randint(24, 41)})"
            )
        elif n % 4 == 3:
            out.append(
                f"{stamp}  WARN 1 --- [{thread}] c.s.inventory.repo.StockReservationRepo : "
                "slow query 2.61s: UPDATE stock_reservations SET state='HELD' WHERE sku_id=? "
                "AND warehouse_id=? AND state='FREE' LIMIT 1 (rows examined: 1,184,302)"
            )
        else:
            took = rng.randint(3050, 3600)
            out.append(
                f"{stamp}  WARN 1 --- [{thread}] c.s.inventory.ReservationController : "
                f"reserve order={order} sku=SKU-{rng.randint(10000, 99999)} qty=2 took {took} ms "
                "(db wait 2900 ms)"
            )
    return "\n".join(out)


def prometheus_pool_query() -> str:
    """An /api/v1/query_range answer for the inventory connection pool."""
    rng = random.Random("prom")
    start = int(datetime(2026, 1, 1, 2, 15, tzinfo=UTC).timestamp())
    series = []
    for pod in ("inventory-svc-7c9f6d8b5-2lqxw", "inventory-svc-7c9f6d8b5-x8k4m"):
        for metric in ("hikaricp_connections_active", "hikaricp_connections_pending"):
            values = []
            for n in range(16):
                if metric.endswith("active"):
                    value = 20 if n >= 5 else rng.randint(6, 14)
                else:
                    value = rng.randint(18, 41) if n >= 5 else 0
                values.append([start + n * 60, str(value)])
            series.append(
                {
                    "metric": {
                        "__name__": metric,
                        "app": "inventory-svc",
                        "pod": pod,
                        "pool": "HikariPool-1",
                        "namespace": "shop",
                    },
                    "values": values,
                }
            )
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": series}})


INVENTORY_APPLICATION_YAML = """\
# services/inventory/src/main/resources/application.yaml
server:
  port: 8081
  tomcat:
    threads:
      max: 200
spring:
  datasource:
    url: jdbc:postgresql://pg-inventory.shop.svc:5432/inventory
    hikari:
      maximum-pool-size: 20
      minimum-idle: 5
      connection-timeout: 2900   # ms; kept under nginx proxy_read_timeout 3s
      max-lifetime: 1800000
  jpa:
    properties:
      hibernate.jdbc.batch_size: 50
inventory:
  reservation:
    hold-minutes: 15
    # TODO(INV-412): the (sku_id, warehouse_id, state) index was dropped in the
    # 2025-12-30 migration V87__split_reservations.sql and never recreated
    lock-strategy: skip-locked"""

# The lossy summary of the error log's grep: no order id, no upstream address, no
# error 110, no 3 s.
LOSSY_ERROR_SUMMARY = (
    "error.log: many 'upstream timed out' errors on checkout requests; the inventory backend "
    "is slow. Probably a capacity issue."
)

# ------------------------------------------------------------- seed 002: orders

ABNORMAL = {
    "SO20260101007": ("exception", "logistics_stalled", "物流停滞超48h"),
    "SO20260101042": ("exception", "address_invalid", "地址异常"),
    "SO20260101103": ("exception", "payment_failed", "支付失败"),
}
PENDING = ("SO20260101015", "SO20260101058", "SO20260101077", "SO20260101096", "SO20260101121")
ORDERS_SUMMARY = (
    "总数128, 已发货120, 待发货5, 异常3: SO20260101007 物流停滞超48h, "
    "SO20260101042 地址异常, SO20260101103 支付失败"
)
_PRODUCTS = (
    ("SKU-10231", "无线蓝牙耳机 Pro", 399.0),
    ("SKU-20488", "USB-C 快充数据线 2m", 49.0),
    ("SKU-31002", "机械键盘 87键 茶轴", 459.0),
    ("SKU-40917", "27英寸 4K 显示器", 2199.0),
    ("SKU-52210", "人体工学办公椅", 1299.0),
    ("SKU-63375", "便携咖啡机", 689.0),
    ("SKU-74120", "降噪头戴耳机", 1599.0),
    ("SKU-85503", "智能手环 7", 249.0),
)
_CARRIERS = (("SF", "顺丰速运"), ("JD", "京东物流"), ("YTO", "圆通速递"), ("ZTO", "中通快递"))
_CITIES = ("上海", "杭州", "苏州", "南京", "武汉", "成都", "广州", "深圳", "北京", "天津")


def _track(rng: random.Random, created: datetime, events: int, city: str) -> list[dict[str, str]]:
    hub = rng.choice(_CITIES)
    steps = [
        ("已揽收", f"{hub}转运中心"),
        ("运输中", f"{hub}转运中心 → {city}分拨中心"),
        ("到达分拨中心", f"{city}分拨中心"),
        ("派送中", f"{city}站点, 快递员电话 138****{rng.randint(1000, 9999)}"),
    ]
    moment = created + timedelta(hours=rng.randint(3, 9))
    out = []
    for status, where in steps[:events]:
        out.append({"time": f"{moment:%Y-%m-%d %H:%M:%S}", "status": status, "location": where})
        moment += timedelta(hours=rng.randint(6, 30))
    return out


def orders_response() -> dict[str, Any]:
    """The raw `query_orders` answer: 128 orders with logistics tracks and items."""
    rng = random.Random("orders")
    orders = []
    for n in range(1, 129):
        order_id = f"SO20260101{n:03d}"
        created = datetime(2026, 1, 1, 8, 0) + timedelta(minutes=n * 7 + rng.randint(0, 6))
        city = rng.choice(_CITIES)
        items: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 2)):
            sku, name, price = rng.choice(_PRODUCTS)
            items.append({"sku": sku, "name": name, "qty": rng.randint(1, 2), "price": price})
        carrier, carrier_name = rng.choice(_CARRIERS)
        status, reason = "shipped", None
        if order_id in ABNORMAL:
            status, reason, _ = ABNORMAL[order_id]
        elif order_id in PENDING:
            status = "pending_shipment"
        if status == "pending_shipment" or reason == "payment_failed":
            logistics: dict[str, Any] | None = None
        else:
            track = _track(rng, created, 2 if reason else rng.randint(2, 3), city)
            logistics = {
                "carrier": carrier,
                "carrier_name": carrier_name,
                "tracking_no": f"{carrier}{rng.randint(10**11, 10**12 - 1)}",
                "last_update": track[-1]["time"],
                "track": track,
            }
        orders.append(
            {
                "order_id": order_id,
                "status": status,
                "exception_reason": reason,
                "create_time": f"{created:%Y-%m-%d %H:%M:%S}",
                "customer_id": f"C{rng.randint(100000, 999999)}",
                "amount": round(sum(i["price"] * i["qty"] for i in items), 2),
                "currency": "CNY",
                "ship_to": {
                    "city": city,
                    "district": "—",
                    "phone": f"1{rng.randint(30, 99)}****{rng.randint(1000, 9999)}",
                },
                "logistics": logistics,
                "items": items,
            }
        )
    return {
        "code": 0,
        "message": "success",
        "data": {"total": 128, "page": 1, "page_size": 200, "list": orders},
    }


def orders_json() -> str:
    return json.dumps(orders_response(), ensure_ascii=False)


def order_detail(order_id: str, audit_entries: int = 34) -> str:
    """`get_order_detail` for one abnormal order: full track, payment and audit trail."""
    order = next(o for o in orders_response()["data"]["list"] if o["order_id"] == order_id)
    rng = random.Random(order_id)
    audit = []
    moment = datetime.strptime(order["create_time"], "%Y-%m-%d %H:%M:%S")
    for n in range(audit_entries):
        moment += timedelta(minutes=rng.randint(20, 300))
        actor = rng.choice(("system", "wms-bot", "cs-agent-117", "carrier-callback", "risk-engine"))
        audit.append(
            {
                "time": f"{moment:%Y-%m-%d %H:%M:%S}",
                "actor": actor,
                "event": rng.choice(
                    (
                        "status_sync",
                        "tracking_poll",
                        "sla_check",
                        "address_verify",
                        "payment_callback",
                        "customer_contact",
                        "ticket_note",
                    )
                ),
                "detail": f"poll #{n + 1}: carrier API returned HTTP 200, no new track event"
                if order["exception_reason"] == "logistics_stalled"
                else f"check #{n + 1}: {order['exception_reason']} still open",
            }
        )
    return json.dumps(
        {
            "code": 0,
            "data": {
                **order,
                "payment": {
                    "channel": "alipay" if order_id != "SO20260101103" else "unionpay",
                    "state": "FAILED" if order_id == "SO20260101103" else "PAID",
                    "error": "51: insufficient funds" if order_id == "SO20260101103" else None,
                },
                "audit_trail": audit,
            },
        },
        ensure_ascii=False,
    )


SOP_DOCS = {
    "ret_sop_stall": (
        "kb://ops-sop/logistics-stall.md §2",
        "物流停滞处理 SOP (v3.2)\n"
        "1. 判定: 承运商轨迹超过 48 小时无更新, 且订单状态为已发货。\n"
        "2. 先调用 carrier_query 主动查询一次; 若承运商返回 '包裹在途' 但无新节点, 视为停滞。\n"
        "3. 停滞 48-72h: 向承运商提交催件工单 (SF 走 '丰桥' 工单接口, JD 走商家后台), "
        "并短信告知客户预计延迟。\n"
        "4. 停滞超过 72h: 发起补发或退款, 二选一由客户决定; 补发单号需回写原订单备注。\n"
        "5. 所有操作在订单审计记录里留痕, 工单号格式 CS-YYYYMMDD-NNNN。\n"
        "Escalation: if the carrier has not answered within 24 h, page the logistics on-call "
        "(#ops-logistics) and attach the tracking number and last known hub.",
    ),
    "ret_sop_address": (
        "kb://ops-sop/address-exception.md §1",
        "地址异常处理 SOP (v2.0)\n"
        "- 地址校验失败 (省市区不匹配、门牌号缺失、驿站不存在) 时订单进入 exception 状态。\n"
        "- 客服需在 4 小时内联系客户确认地址, 修改地址只能通过 address_update 接口, "
        "禁止在备注里手写新地址。\n"
        "- 修改后重新触发 WMS 出库; 若已出库, 则向承运商提交改址 (收费 5 元, 由平台承担)。\n"
        "- 客户 24 小时未回复: 再次短信提醒; 72 小时未回复: 取消订单并全额退款。\n"
        "Note: addresses in Pudong that use the old 'Nanhui' district name fail validation; "
        "map them before retrying.",
    ),
    "ret_sop_payment": (
        "kb://ops-sop/payment-failure.md §3",
        "支付失败处理 SOP (v1.4)\n"
        "- 支付渠道返回失败码时, 订单保留 30 分钟待重新支付, 超时自动关闭。\n"
        "- 常见失败码: 51 余额不足, 54 卡过期, 61 超出限额, 91 发卡行不可用。\n"
        "- 91 可自动重试一次; 51/54/61 需通知客户更换支付方式, 不可自动重试。\n"
        "- 已锁定的库存在订单关闭时释放; 若客户重新下单, 需提醒客户使用原优惠券 "
        "(优惠券会在关闭后 10 分钟内退回)。\n"
        "Refunds for partially captured payments go through finance, not through the agent.",
    ),
}

SOP_EXTRA = {
    "ret_sop_sla": (
        "kb://ops-sop/sla-matrix.md",
        "SLA matrix for order incidents (2026 Q1)\n"
        "| incident | first response | resolution | owner |\n"
        "| logistics stalled 48-72h | 4 h | 48 h | logistics desk |\n"
        "| logistics stalled > 72h | 1 h | 24 h | logistics desk + CS lead |\n"
        "| address exception | 4 h | 72 h | customer service |\n"
        "| payment failure | 30 min (auto) | order closes after 30 min | payments |\n"
        "| pending shipment > 24h | 8 h | 48 h | warehouse (WMS) |\n"
        "Breaches are reported in the daily ops review; each breach needs a ticket id and a "
        "root-cause note. Repeated breaches for one carrier trigger a carrier review.\n"
        "海外仓订单 (仓库编码以 OW- 开头) 的时限全部乘以 2。",
    ),
    "ret_sop_comms": (
        "kb://ops-sop/customer-comms.md §4",
        "客户沟通模板 (订单异常)\n"
        "【物流延迟】您好, 您的订单 {order_id} 因承运商中转延误暂未更新物流, 我们已提交催件工单 "
        "{ticket_id}, 预计 {eta} 前给您答复。如需补发或退款请回复 1 或 2。\n"
        "【地址异常】您好, 您的订单 {order_id} 收货地址校验未通过 ({reason}), "
        "请在 24 小时内点击链接"
        "修改地址: {link}\n"
        "【支付失败】您好, 您的订单 {order_id} 支付未成功 ({code}), 订单将保留 30 分钟, "
        "请更换支付方式后重新支付。\n"
        "Tone rules: no blame on the carrier by name; never promise a delivery date the "
        "carrier has not confirmed; include the ticket id in every follow-up.",
    ),
}

OPS_MEMORY = (
    "Shift handover notes (night shift → day shift, 2026-01-15 08:00):\n"
    "- Yesterday's audit found 2 stalled SF parcels in the Wuhan hub; both resumed after a "
    "催件工单 (CS-20260114-0031, CS-20260114-0032). The Wuhan hub has had weather delays "
    "since 2026-01-12, so stalls there are expected to resolve within 72 h.\n"
    "- The ops lead (Zhou Min) wants abnormal orders reported as a table: order id, "
    "problem, since when, next action, owner. No prose paragraphs.\n"
    "- Payment failures with code 51 must not be retried automatically (customer "
    "complaint CS-20260110-0207 after a double charge attempt).\n"
    "- WMS had a 40-minute outage on 2026-01-14 between 21:10 and 21:50; orders created in "
    "that window may show pending_shipment for up to 24 h longer than usual.\n"
    "- Address validation rejects the old 'Nanhui' district name for Pudong addresses; "
    "three orders last week needed manual mapping.\n"
    "- The daily report goes to #ops-daily by 10:00; the finance team reads the payment "
    "section, so keep failure codes exact.\n"
    "- Preference carried over from last week: when more than 5 orders are abnormal, group "
    "them by carrier first; otherwise list them individually.\n"
    "- Known noise: orders with status shipped but no track for < 12 h are normal for ZTO "
    "night pickups and should not be reported."
)

# ------------------------------------------------------ seed 001: customer chat

CHAT_SYSTEM = (
    "You are the after-sales assistant of BrewHouse Online. Be concise and factual, quote "
    "tracking numbers exactly, never invent delivery dates, and hand over to a human agent "
    "when the customer asks for it. Tools: order_lookup, tracking_lookup, voucher_issue, "
    "rma_create."
)

# The hard constraints the customer gives at turn 1 (member id, table preference).
PINNED = ["member id A12345", "answer in a table"]

_SF_TRACK = (
    "| time | location | event |\n|---|---|---|\n"
    "| 11-21 09:12 | Shanghai Qingpu warehouse | picked up by SF Express |\n"
    "| 11-21 18:40 | Shanghai Hongqiao hub | departed, next stop Wuhan |\n"
    "| 11-22 07:55 | Wuhan Dongxihu hub | arrived |\n"
    "| 11-22 08:02 | Wuhan Dongxihu hub | sorting |\n"
    "| 11-24 21:13 | Wuhan Dongxihu hub | delayed: line-haul capacity (weather) |\n"
)

CHAT_TURNS: list[tuple[str, str]] = [
    (
        "Hi, I'm Lin Wei, member id A12345. My order SO20251120088 (the Breville Barista "
        "Express) still hasn't arrived. Please answer in a table, I'm reading on my phone.",
        "| item | value |\n|---|---|\n| order | SO20251120088 |\n| product | Breville Barista "
        "Express BES870 |\n| paid | 2025-11-20 22:41 |\n| carrier | SF Express |\n"
        "| tracking | SF1428803927056 |\n| status | in transit |\n"
        "Thanks, Lin. I'll look into where the parcel is now.",
    ),
    (
        "The tracking page has said 'in transit' since Monday. Where exactly is it?",
        "Here is the full SF Express timeline for SF1428803927056:\n"
        + _SF_TRACK
        + "The parcel has been held at the Wuhan Dongxihu hub since 22 Nov 07:55. SF reports "
        "line-haul capacity problems caused by snow on the Wuhan–Shanghai corridor; about "
        "18,000 parcels are queued at that hub. SF's own estimate is that the backlog clears "
        "in 48–72 hours, after which the parcel goes back on a truck to Shanghai (about 14 "
        "hours), then to your local station in Minhang for delivery the next morning.",
    ),
    (
        "Can the courier deliver to my office instead? 5F, 88 Century Avenue, Pudong, Shanghai.",
        "Yes, SF allows one address change while the parcel is in transit. What happens:\n"
        "| step | detail |\n|---|---|\n"
        "| 1 | I send the change request to SF with the new address |\n"
        "| 2 | SF sends a 6-digit verification code to the phone on the order (ending 5521) |\n"
        "| 3 | you tell me the code; SF re-routes at the next hub scan |\n"
        "| fee | the 5 CNY re-routing fee is covered by us because of the delay |\n"
        "Office deliveries happen between 09:00 and 18:00 on weekdays; if nobody is at the "
        "reception, SF leaves the parcel at the Fengchao locker in the lobby and texts a "
        "pickup code. Shall I send the request?",
    ),
    (
        "Yes please. The verification code is 482913.",
        "Done. The change request for SF1428803927056 was accepted at 14:06:\n"
        "| field | old | new |\n|---|---|---|\n| address | 1203, Lane 99 Hongxin Rd, Minhang | "
        "5F, 88 Century Avenue, Pudong |\n| station | Minhang Hongxin | Pudong Lujiazui |\n"
        "| ETA | unknown (hub backlog) | 2 days after the parcel leaves Wuhan |\n"
        "SF will apply the new address at the next scan, which is when the parcel leaves the "
        "Wuhan hub. The old station in Minhang will not see the parcel at all. You'll get an "
        "SMS from 95338 when the parcel is out for delivery, usually before 10:00.",
    ),
    (
        "I also ordered the grinder attachment separately (SO20251121014). Is it in the same "
        "parcel?",
        "No, it ships separately. SO20251121014 left our Guangzhou warehouse with JD Logistics:\n"
        "| time | location | event |\n|---|---|---|\n"
        "| 11-22 10:31 | Guangzhou Huangpu warehouse | picked up by JD Logistics |\n"
        "| 11-22 23:50 | Guangzhou Baiyun sorting center | departed |\n"
        "| 11-23 19:24 | Hangzhou Xiaoshan hub | arrived |\n"
        "| 11-24 06:15 | Shanghai Jiading hub | arrived |\n"
        "| 11-24 09:40 | Shanghai Minhang station | out for delivery |\n"
        "Tracking number JDV0042318876. Because you changed the address of the first parcel "
        "only, this one is still going to the Minhang address. JD usually delivers within "
        "the day once it is out for delivery; the courier will call the number ending 5521.",
    ),
    (
        "Why did the second one go through Guangzhou? I live in Shanghai.",
        "Accessories are stocked only in our Guangzhou Huangpu warehouse, while machines are "
        "stocked in Shanghai Qingpu. When an order contains items from both, or when the "
        "accessory is ordered separately as here, each warehouse ships on its own. JD routes "
        "Guangzhou → Hangzhou → Shanghai because its direct Guangzhou → Shanghai line-haul "
        "runs only at night and was full on 22 Nov (the Double-11 return wave). The detour "
        "added about 10 hours but avoided the Wuhan corridor where your machine is stuck. "
        "We're moving popular accessories to Qingpu in January, so future orders should "
        "arrive in one parcel. I've noted the split-shipment feedback on your order.",
    ),
    (
        "OK. What's your compensation policy for delays?",
        "| delay past the promised date | compensation |\n|---|---|\n"
        "| 24–72 hours | 10 CNY voucher, no minimum spend |\n"
        "| more than 72 hours | 20 CNY voucher or free return of the item |\n"
        "| more than 7 days | 50 CNY voucher, or cancel with full refund including shipping |\n"
        "Vouchers are valid for 90 days and are issued to the member account that placed the "
        "order. They can't be converted to cash. For orders shipped by SF or JD the delay is "
        "counted from the 'promised by' date on the order page, not from the payment date; "
        "for SO20251120088 that date was 23 Nov.",
    ),
    (
        "It's been 9 days since I paid for the machine.",
        "Counting from the promised date (23 Nov), SO20251120088 is now 6 days late, so it "
        "qualifies for the 'more than 72 hours' tier: a 20 CNY voucher or a free return. "
        "If it is still not delivered by 30 Nov it moves to the 'more than 7 days' tier "
        "(50 CNY or a full refund). I can issue the 20 CNY voucher now and top it up to 50 CNY "
        "automatically if the 7-day mark passes, so you don't have to contact us again.",
    ),
    (
        "Then I want the voucher. Can it stack with the Double-12 coupon?",
        "Voucher issued: DLY-20-7F3K9Q, 20 CNY, valid until 2026-02-27, with the automatic "
        "top-up to 50 CNY if the 7-day mark passes. Stacking rules:\n"
        "| combination | allowed? |\n|---|---|\n| delay voucher + Double-12 store coupon | yes |\n"
        "| delay voucher + platform-wide Double-12 discount | yes |\n"
        "| two delay vouchers | no, one per order |\n| delay voucher + gift card | yes |\n"
        "The Double-12 coupon applies first, then the voucher, and the total discount can't "
        "exceed 50% of the order value.",
    ),
    (
        "Any update on the machine?",
        "Yes, it moved today:\n"
        "| time | location | event |\n|---|---|---|\n"
        "| 11-29 04:10 | Wuhan Dongxihu hub | departed, next stop Shanghai |\n"
        "| 11-29 17:52 | Shanghai Hongqiao hub | arrived |\n"
        "| 11-29 18:30 | Shanghai Hongqiao hub | address changed per customer request |\n"
        "| 11-29 21:05 | Shanghai Pudong Lujiazui station | arrived |\n"
        "So the new address was applied at the Hongqiao scan. Delivery to the office is "
        "planned for Monday morning, since the office address has no weekend delivery. "
        "It will not arrive by 30 Nov, so your voucher goes up to 50 CNY automatically.",
    ),
    (
        "The app now shows 'exception: address unreachable'?! I changed the address!",
        "I see it: at 08:47 today the Lujiazui station marked the parcel 'address "
        "unreachable'. The courier's handheld still had the old Minhang address because the "
        "change was applied at the hub but not synced to the station's delivery list, a known "
        "SF sync issue after re-routing. I've asked SF to correct the delivery list and "
        "re-attempt delivery. Their reply: corrected at 09:20, re-attempt tomorrow "
        "09:00–12:00. Nothing is needed from you; the parcel is safe at the station.",
    ),
    (
        "This is ridiculous. Please escalate.",
        "Escalated. Ticket CS-20251201-7781 is with our logistics team lead, priority high, "
        "first response within 4 hours and resolution within 24 hours. The ticket includes "
        "the tracking number, the address-change record and the failed attempt. You'll get "
        "an update by SMS and in the app's message center. I've also added a note that any "
        "further failed attempt should be called through to you before the parcel is "
        "returned to the station.",
    ),
    (
        "Any news on the ticket?",
        "Ticket CS-20251201-7781 was answered at 13:40 by Chen Jie (logistics lead): SF "
        "confirmed the delivery list fix and assigned a dedicated courier for tomorrow's "
        "09:00–12:00 attempt. If that attempt fails for any reason on SF's side, we'll "
        "cancel the shipment, refund in full and send a new machine from Qingpu by JD with "
        "next-day delivery, at no cost to you.",
    ),
    (
        "The courier called. They'll deliver tomorrow between 9 and 12.",
        "Great, that matches the ticket. The courier's number ends in 0637 and the delivery "
        "needs the 4-digit code SF texts you in the morning. The ticket stays open until "
        "the parcel is signed for.",
    ),
    (
        "About the grinder attachment: it arrived but the burr is cracked. Photo attached.",
        "Sorry about that. The photo shows a crack across the conical burr, which is covered "
        "as transport damage. Options:\n"
        "| option | what happens | timing |\n|---|---|---|\n"
        "| exchange | JD picks up the damaged part, a new one ships from Guangzhou | 3–4 days |\n"
        "| refund | JD picks up, refund to the original payment method | 1–3 days after pickup |\n"
        "| keep + partial refund | 60% refund, no pickup | immediate |\n"
        "For the exchange or refund, JD picks up from the Minhang address; pack the part in "
        "the original box if you still have it.",
    ),
    (
        "Exchange please, not a refund.",
        "Exchange created: RMA-5518820 for SO20251121014 (grinder attachment). JD pickup "
        "windows at the Minhang address: Sat 14:00–16:00, Sun 10:00–12:00, Mon 18:00–20:00. "
        "The replacement ships from Guangzhou as soon as JD scans the pickup.",
    ),
    (
        "Saturday 14:00–16:00 works.",
        "Booked: JD pickup Saturday 14:00–16:00 at Minhang. The courier prints the return "
        "label, so you only need the part and its box.",
    ),
    (
        "The espresso machine was delivered! Thanks.",
        "Glad it arrived! I've closed ticket CS-20251201-7781 as resolved.",
    ),
    (
        "Can you sum up everything that's still open?",
        "Still open:\n"
        "- RMA-5518820: JD pickup of the damaged grinder attachment on Saturday 14:00–16:00, "
        "replacement ships from Guangzhou afterwards.\n"
        "- Delay voucher DLY-20-7F3K9Q (topped up to 50 CNY) is in your account.\n"
        "Everything else is closed.",
    ),
    (
        "Last thing: is my member id still valid for the delay voucher? Which member id did I "
        "give you at the start?",
        "I'm sorry, I can't find your member id in our conversation. Could you send it "
        "again? Vouchers are tied to the member account that placed the order, so I need "
        "it to check.",
    ),
]

# Running summaries of the summary mode, one per compaction: each covers only the
# turns it folds, which no longer include turn 1 (member id, table preference).
CHAT_SUMMARIES = {
    "summary_1": (
        "Summary of turns 7-11: delay compensation is 10 CNY for 24-72 h, a 20 CNY voucher "
        "or free return past 72 h, and 50 CNY or a full refund past 7 days. Order "
        "SO20251120088 is 6 days past its promised date (23 Nov); voucher DLY-20-7F3K9Q "
        "(20 CNY, valid to 2026-02-27) was issued with an automatic top-up to 50 CNY after "
        "30 Nov and stacks with the Double-12 coupon. The machine left Wuhan on 29 Nov and "
        "reached the Pudong Lujiazui station; delivery failed as 'address unreachable' "
        "because the station still had the old address. SF fixed the list and re-attempts "
        "09:00-12:00."
    ),
    "summary_2": (
        "Summary so far: SO20251120088 (espresso machine) is 6 days late; voucher "
        "DLY-20-7F3K9Q (50 CNY after the 30 Nov top-up). After a failed delivery the "
        "customer escalated: ticket CS-20251201-7781, answered by Chen Jie, a dedicated SF "
        "courier delivers tomorrow 09:00-12:00 (courier phone ending 0637, SMS code needed); "
        "fallback is a full refund and a new machine from Qingpu by JD."
    ),
    "summary_3": (
        "Summary so far: the espresso machine SO20251120088 is due tomorrow 09:00-12:00 "
        "under ticket CS-20251201-7781. Voucher DLY-20-7F3K9Q (50 CNY) issued. The grinder "
        "attachment SO20251121014 arrived with a cracked burr; exchange RMA-5518820 is "
        "booked, JD pickup Saturday 14:00-16:00 at the Minhang address."
    ),
}

# ------------------------------------------------- seed 001: hybrid / retrieval

WARRANTY_KB = {
    "kb_warranty_1": (
        "kb://policies/warranty.md §1",
        '<reference source="kb://policies/warranty.md §1">Espresso machines sold by '
        "BrewHouse Online carry a 2-year manufacturer warranty from the delivery date. "
        "Members of the Gold tier and above get a third year of BrewHouse extended warranty "
        "at no cost, registered automatically against the member id that placed the order. "
        "The warranty covers pumps, boilers, heating elements and electronics; it does not "
        "cover descaling damage, gaskets, or damage from using the machine with water "
        "harder than 300 ppm without a filter.</reference>",
    ),
    "kb_warranty_2": (
        "kb://policies/warranty.md §4",
        '<reference source="kb://policies/warranty.md §4">To claim warranty service, the '
        "customer needs the order number, the serial number on the machine's base plate "
        "(format BES870xxxxxxxx) and a short video of the fault. Repairs take 7–10 working "
        "days at the Shanghai service center; a loan machine is offered to Gold members for "
        "repairs longer than 5 days. Warranty repairs are free including two-way shipping."
        "</reference>",
    ),
    "kb_membership_1": (
        "kb://policies/membership.md §2",
        '<reference source="kb://policies/membership.md §2">Member tiers are computed '
        "over the last 12 months of spend: Silver from 2,000 CNY, Gold from 6,000 CNY, "
        "Platinum from 15,000 CNY. Tier changes apply on the 1st of each month. A member id "
        "(letter + 5 digits) never changes, even when the tier does.</reference>",
    ),
    "kb_descale_1": (
        "kb://manuals/bes870.md §9",
        '<reference source="kb://manuals/bes870.md §9">Descale every 2–3 months, or when '
        "the CLEAN/DESCALE light comes on. Use only citric-acid based descalers. A pump "
        "that hums without pushing water after descaling is usually an air lock: run the "
        "hot water wand for 30 seconds, then pull two blank shots.</reference>",
    ),
    "kb_loan_1": (
        "kb://policies/warranty.md §6",
        '<reference source="kb://policies/warranty.md §6">Loan machines are Breville '
        "Bambino Plus units shipped by SF next-day. They must be returned within 5 days of "
        "the repaired machine's delivery; a late return is charged 30 CNY per day.</reference>",
    ),
}

WARRANTY_TURNS: list[tuple[str, str]] = [
    (
        "Hello again, Lin Wei here, member id A12345. The espresso machine from SO20251120088 "
        "makes a humming noise but no water comes out. Please answer in a table.",
        "| item | value |\n|---|---|\n| order | SO20251120088 |\n| delivered | 2025-12-02 |\n"
        "| symptom | pump hums, no water |\n| likely cause | air lock after descaling, or a "
        "pump fault |\nDid you descale the machine recently?",
    ),
    (
        "Yes, I descaled it yesterday with the Breville descaler.",
        "| step | action |\n|---|---|\n| 1 | run the hot water wand for 30 seconds |\n"
        "| 2 | pull two blank shots without coffee |\n| 3 | if it still hums, stop and don't "
        "run it dry |\nThis clears an air lock in most cases.",
    ),
    (
        "Still humming after both steps.",
        "| item | value |\n|---|---|\n| diagnosis | likely pump fault |\n| covered? | yes, "
        "pumps are covered by the 2-year warranty |\n| needed | order number, serial number "
        "(base plate, BES870xxxxxxxx), a short video |\n| repair time | 7–10 working days |",
    ),
    (
        "Serial BES870A2513447, video uploaded. How long will I be without coffee?",
        "| item | value |\n|---|---|\n| claim | WR-20251215-0412 |\n| pickup | SF, tomorrow "
        "09:00–18:00 |\n| repair | 7–10 working days, Shanghai service center |\n"
        "| loan machine | offered to Gold members for repairs over 5 days |",
    ),
    (
        "Am I Gold? And will the repair still be covered next year?",
        "| item | value |\n|---|---|\n| member id | A12345 |\n| tier | Gold (8,420 CNY in the "
        "last 12 months) |\n| loan machine | yes, Bambino Plus, SF next-day |\n| warranty "
        "| 2 years manufacturer + 1 year BrewHouse extended, until 2028-12-02 |",
    ),
    (
        "Great, send the loan machine. What happens if I return it late?",
        "| item | value |\n|---|---|\n| loan shipment | SF1430077210934, arrives tomorrow |\n"
        "| return by | 5 days after your repaired machine is delivered |\n| late fee | 30 CNY "
        "per day |",
    ),
    (
        "Which member id is the extended warranty registered to? I want to be sure it's mine.",
        "| item | value |\n|---|---|\n| member id | A12345 |\n| registered | automatically, "
        "against the member id that placed SO20251120088 |\n| extended warranty ends | "
        "2028-12-02 |",
    ),
]

# ---------------------------------------------------- seed 003: research notes

RESEARCH_QUESTION = (
    "悉尼歌剧院的设计师是哪一年获得普利兹克建筑奖的？那时距离歌剧院正式开幕过去了多少年？\n"
    "(In which year did the architect of the Sydney Opera House win the Pritzker Prize, and "
    "how many years after the building's official opening was that?)"
)

RESEARCH_SYSTEM = (
    "You are a research agent. Think step by step, call `search(query)` or `open(url)` "
    "when you need facts, and give the final answer as `ANSWER: ...` with the sources you "
    "used. Keep exact dates and numbers."
)


def search_results(query: str, results: list[tuple[str, str, str]]) -> str:
    lines = [f"search({json.dumps(query, ensure_ascii=False)}) → {len(results)} results"]
    for n, (title, url, snippet) in enumerate(results, 1):
        lines.append(f"[{n}] {title}\n    {url}\n    {snippet}")
    return "\n".join(lines)


RESEARCH_SEARCHES: list[tuple[str, str, list[tuple[str, str, str]]]] = [
    (
        "I need the architect first. Searching for who designed the Sydney Opera House.",
        "Sydney Opera House architect",
        [
            (
                "Sydney Opera House - Wikipedia",
                "https://en.wikipedia.org/wiki/Sydney_Opera_House",
                "The Sydney Opera House is a multi-venue performing arts centre in Sydney. "
                "Designed by Danish architect Jørn Utzon and completed by an Australian "
                "architectural team headed by Peter Hall, the building was formally opened "
                "by Queen Elizabeth II on 20 October 1973 ...",
            ),
            (
                "Jørn Utzon - Wikipedia",
                "https://en.wikipedia.org/wiki/J%C3%B8rn_Utzon",
                "Jørn Oberg Utzon (9 April 1918 – 29 November 2008) was a Danish architect, "
                "most notable for designing the Sydney Opera House. In 1957 he won the "
                "international design competition for the building ...",
            ),
            (
                "The 1957 Opera House competition - architecture history notes",
                "https://history.example.org/sydney-opera-house/competition-1957",
                "Entry No. 218 by the Danish architect Jørn Utzon was announced the winner "
                "on 29 January 1957; the jury included Eero Saarinen ...",
            ),
            (
                "10 things you didn't know about the Opera House - city guide",
                "https://guide.example.com/sydney/opera-house-facts",
                "The roof shells are covered by 1,056,006 glazed tiles made in Sweden ...",
            ),
            (
                "Opera House tours - tickets",
                "https://tickets.example.com/sydney/opera-house-tour",
                "Take the one-hour guided tour and hear the stories behind the sails ...",
            ),
        ],
    ),
    (
        "Hop 2: when did Jørn Utzon receive the Pritzker Prize?",
        "Jørn Utzon Pritzker Prize year",
        [
            (
                "Pritzker Architecture Prize - Wikipedia",
                "https://en.wikipedia.org/wiki/Pritzker_Architecture_Prize",
                "Laureates: ... 2002 Glenn Murcutt (Australia); 2003 Jørn Utzon (Denmark); "
                "2004 Zaha Hadid (Iraq / United Kingdom) ...",
            ),
            (
                "Jørn Utzon - Wikipedia",
                "https://en.wikipedia.org/wiki/J%C3%B8rn_Utzon",
                "In 2003 Utzon received the Pritzker Prize, architecture's highest honour. "
                "The jury said the Sydney Opera House is 'his masterpiece' ...",
            ),
            (
                "Architecture prizes explained - design weekly",
                "https://design.example.net/prizes/pritzker-explained",
                "The Pritzker is awarded annually by the Hyatt Foundation; laureates receive "
                "US$100,000 and a bronze medallion ...",
            ),
        ],
    ),
    (
        "Hop 3: I need the official opening date and should double-check construction dates.",
        "Sydney Opera House official opening date construction",
        [
            (
                "Sydney Opera House - Wikipedia (History)",
                "https://en.wikipedia.org/wiki/Sydney_Opera_House#History",
                "Construction began in March 1959. After Utzon resigned in February 1966 the "
                "interiors were completed under Peter Hall. Queen Elizabeth II formally opened "
                "the building on 20 October 1973. The project was completed ten years late "
                "and cost A$102 million, against an original estimate of A$7 million.",
            ),
            (
                "Opening day, 1973 - architecture history notes",
                "https://history.example.org/sydney-opera-house/opening-1973",
                "The Queen opened the Opera House on 20 October 1973; the first public "
                "performance, Prokofiev's War and Peace, had taken place on 28 September "
                "1973 ...",
            ),
        ],
    ),
    (
        "Side track: why did Utzon leave the project? It may matter for 'never saw completed'.",
        "Utzon resignation 1966 reasons",
        [
            (
                "Jørn Utzon - Wikipedia (Resignation)",
                "https://en.wikipedia.org/wiki/J%C3%B8rn_Utzon#Resignation",
                "Utzon resigned in 1966 after the New South Wales Minister for Public Works, "
                "Davis Hughes, withheld payments and questioned his designs for the "
                "interiors ...",
            ),
            (
                "Utzon and Sydney after 1966 - architecture history notes",
                "https://history.example.org/sydney-opera-house/after-1966",
                "Utzon left Australia in 1966 and never returned to see the finished "
                "building; in 1999 he was re-engaged to write design principles for future "
                "changes ...",
            ),
        ],
    ),
]
