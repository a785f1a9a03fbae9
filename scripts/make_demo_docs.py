"""Generate the two binary documents of the demo corpus: a PDF datasheet and a DOCX manual.

The Markdown, HTML and text documents in data/demo/ are written by hand and
committed as they are; this script only makes the formats that need a
library to write.  Output is byte-for-byte reproducible: fixed creation dates
and fixed ZIP timestamps, so re-running it leaves git clean.

    python scripts/make_demo_docs.py [--out data/demo]
"""

from __future__ import annotations

import argparse
import io
import zipfile
from datetime import datetime, timezone
from pathlib import Path

FIXED_DATE = datetime(2026, 1, 15, 9, 0, 0, tzinfo=timezone.utc)

# The PDF stays English so fpdf2's core fonts can draw it (no CJK font needed).
DATASHEET = [
    ("title", "Nimbus N2 Edge Appliance - Datasheet"),
    ("text", "Document revision 2026-01. Applies to hardware revision B and firmware 3.2.x."),
    ("heading", "Overview"),
    ("text", "The Nimbus N2 is a compact edge appliance that parses, indexes and searches documents on site. "
             "It can work on its own or as a local indexing node for an Aurora tenant."),
    ("heading", "Hardware"),
    ("text", "Processor: 8-core x86 CPU at 2.4 GHz. Memory: 32 GB ECC RAM. Storage: 2 TB NVMe SSD, "
             "encrypted with a TPM-sealed key. Network: two 2.5 GbE ports and one management port."),
    ("heading", "Power and environment"),
    ("text", "The maximum power draw of the Nimbus N2 is 45 W at full load; typical draw while idle is 18 W. "
             "The appliance accepts 100-240 V AC through the supplied adapter. "
             "Operating temperature: 0 to 40 degrees Celsius. Relative humidity: 10% to 85%, non-condensing."),
    ("heading", "Dimensions"),
    ("text", "Size: 210 x 180 x 52 mm. Weight: 1.9 kg. The appliance can be mounted on a wall or in a "
             "19-inch rack with the optional bracket."),
    ("heading", "Capacity"),
    ("text", "One N2 indexes up to 2 million documents and answers up to 40 search queries per second. "
             "Indexing throughput is about 120 pages per minute for text PDFs."),
]

# The DOCX is Chinese: python-docx writes any Unicode text.
MANUAL = [
    ("title", "Nimbus 安装与使用手册"),
    ("text", "本手册适用于 Nimbus N1 和 N2 设备。首次安装大约需要 20 分钟。"),
    ("heading", "开箱检查"),
    ("text", "包装内应有：Nimbus 主机一台、电源适配器一个、网线一根、壁挂支架一套和快速入门卡一张。"),
    ("heading", "安装步骤"),
    ("text", "第一步：把设备放在通风良好的位置，接上电源和网线。"),
    ("text", "第二步：用电脑连接管理口，在浏览器中打开默认管理地址 192.168.50.1。"),
    ("text", "第三步：使用快速入门卡上的一次性激活码完成激活，并立即设置新的管理员密码。"),
    ("text", "第四步：在“系统 → 固件”页面检查更新，建议升级到最新固件。"),
    ("heading", "指示灯说明"),
    ("text", "绿灯常亮表示运行正常；绿灯闪烁表示正在建立索引；黄灯常亮表示固件正在升级，请勿断电；"
             "红灯闪烁表示硬件故障，请查看控制台中的错误代码。"),
    ("heading", "恢复出厂设置"),
    ("text", "在设备通电状态下，用针按住背面的复位孔 10 秒，直到指示灯变成白色。恢复出厂设置会清除所有索引和账号，"
             "但不会降级固件。"),
]


def make_pdf(path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_title("Nimbus N2 Datasheet")
    pdf.set_author("Halcyon Data")
    pdf.set_creator("make_demo_docs.py")
    pdf.set_producer("fpdf2")
    pdf.add_page()
    for kind, text in DATASHEET:
        size, style, gap = {"title": (18, "B", 12), "heading": (13, "B", 9), "text": (11, "", 7)}[kind]
        pdf.set_font("Helvetica", style=style, size=size)
        pdf.multi_cell(0, gap, text, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(2)
    pdf.output(str(path))


def make_docx(path: Path) -> None:
    import docx

    document = docx.Document()
    props = document.core_properties
    props.author = "Halcyon Data"
    props.title = "Nimbus 安装与使用手册"
    props.created = props.modified = FIXED_DATE.replace(tzinfo=None)
    props.last_modified_by = "make_demo_docs.py"
    props.revision = 1
    for kind, text in MANUAL:
        if kind == "title":
            document.add_heading(text, level=0)
        elif kind == "heading":
            document.add_heading(text, level=1)
        else:
            document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    path.write_bytes(_with_fixed_zip_times(buffer.getvalue()))


def _with_fixed_zip_times(data: bytes) -> bytes:
    """Rewrite a ZIP with constant member timestamps (python-docx stamps the current time)."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            info = zipfile.ZipInfo(item.filename, date_time=FIXED_DATE.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            target.writestr(info, source.read(item.filename))
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "demo")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    make_pdf(args.out / "nimbus_n2_datasheet.pdf")
    make_docx(args.out / "nimbus_manual_zh.docx")
    print(f"wrote nimbus_n2_datasheet.pdf and nimbus_manual_zh.docx to {args.out}")


if __name__ == "__main__":
    main()
