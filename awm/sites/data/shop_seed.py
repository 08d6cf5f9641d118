"""Seed the arena's shop (django-oscar) from `shop_seed.json`, through Oscar's own models and services.

Run by the site's own virtualenv, never imported by awm:

    venv/bin/python shop_seed.py STATE_DIR SEED_JSON

STATE_DIR holds the migrated Django project (`shopsite/`, `shop.sqlite3`); the seed adds `media/` (product
pictures and their thumbnails) and builds the search index (`whoosh_index/`). Why Oscar's services and
not SQL: orders placed through `OrderCreator` and moved along the status pipeline get the lines,
allocations, status changes, stock movements and analytics rows the real checkout and dashboard make.

Deterministic: Django's clock (`django.utils.timezone.now`) is replaced by a settable one before the
models load, so every `auto_now`/`default=now` column holds a fixed time; passwords are hashed with a
fixed salt; random keys are overwritten with the seed file's; product pictures are drawn here (no
downloads) and their thumbnails made at build time (run with PYTHONHASHSEED=0: sorl-thumbnail stores
sets as JSON lists).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import textwrap
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from django.utils import timezone

SHOP_TZ = ZoneInfo("America/New_York")
# The clock every model reads while seeding (see the module docstring).
_now = [datetime(2026, 1, 1, 9, 0, tzinfo=SHOP_TZ)]
timezone.now = lambda: _now[0]

PICTURE_COLORS = {  # top-level category -> background of the drawn product pictures
    "Books": (47, 75, 124),
    "Electronics": (55, 65, 81),
    "Home & Kitchen": (181, 82, 59),
    "Outdoors": (46, 107, 79),
}
THUMBNAIL_SIZES = ("x155", "440x400", "200x200", "100x100", "70x70")  # those Oscar's templates ask for


def at(stamp: str) -> datetime:
    """A seed file time (shop-local, ISO without zone) as an aware datetime; also sets the clock."""
    moment = datetime.fromisoformat(stamp).replace(tzinfo=SHOP_TZ)
    _now[0] = moment
    return moment


def main(state_dir: Path, seed_file: Path) -> None:
    sys.path.insert(0, str(state_dir))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
    import django

    django.setup()
    from django.apps import apps
    from django.core.management import call_command
    from django.db import transaction

    # One index build at the end, not one index write per saved product.
    apps.get_app_config("haystack").signal_processor.teardown()
    seed = json.loads(seed_file.read_text())
    with transaction.atomic():
        Seeder(seed, state_dir).run()
    call_command("rebuild_index", interactive=False, verbosity=0)


class Seeder:
    """One pass over the seed file; each method makes one kind of thing, in dependency order."""

    def __init__(self, seed: dict, state_dir: Path) -> None:
        from oscar.core.loading import get_model

        self.seed = seed
        self.media = state_dir / "media"
        self.m = get_model
        self.products: dict[str, object] = {}
        self.users: dict[str, object] = {}
        self.categories: dict[str, object] = {}

    def run(self) -> None:
        at("2026-01-01T09:00:00")
        self.site_and_pages()
        self.countries()
        self.catalogue()
        self.accounts()
        self.reviews()
        self.offers()
        self.orders()
        self.open_baskets()
        self.wishlists()
        self.thumbnails()

    # --- the shop itself ---------------------------------------------------------------------------
    def site_and_pages(self) -> None:
        from django.contrib.flatpages.models import FlatPage
        from django.contrib.sites.models import Site

        shop = self.seed["shop"]
        Site.objects.filter(pk=1).update(domain=shop["domain"], name=shop["name"])
        for page in self.seed["pages"]:
            flat = FlatPage.objects.create(url=page["url"], title=page["title"], content=page["content"])
            flat.sites.add(1)

    def countries(self) -> None:
        Country = self.m("address", "Country")
        for c in self.seed["countries"]:
            Country.objects.create(
                iso_3166_1_a2=c["code"], iso_3166_1_a3=c["a3"], iso_3166_1_numeric=c["numeric"], name=c["name"],
                printable_name=c["printable_name"], is_shipping_country=c["shipping"], display_order=c["display_order"],
            )  # fmt: skip

    # --- catalogue -----------------------------------------------------------------------------------
    def catalogue(self) -> None:
        Category = self.m("catalogue", "Category")
        for top in self.seed["categories"]:
            root = Category.objects.add_root({"name": top["name"], "description": top["description"]})
            self.categories[top["name"]] = root
            for child in top.get("children", []):
                node = Category.objects.add_child(
                    root, {"name": child["name"], "description": child["description"]}
                )
                self.categories[f"{top['name']} > {child['name']}"] = node
                self.categories[child["name"]] = node

        ProductClass = self.m("catalogue", "ProductClass")
        ProductAttribute = self.m("catalogue", "ProductAttribute")
        AttributeOptionGroup = self.m("catalogue", "AttributeOptionGroup")
        AttributeOption = self.m("catalogue", "AttributeOption")
        classes, options = {}, {}
        for spec in self.seed["product_classes"]:
            cls = ProductClass.objects.create(name=spec["name"], requires_shipping=True, track_stock=True)
            classes[spec["name"]] = cls
            for attr in spec["attributes"]:
                group = None
                if attr["type"] == "option":
                    group = AttributeOptionGroup.objects.create(name=f"{spec['name']} {attr['name'].lower()}")
                    for value in attr["options"]:
                        options[(spec["name"], attr["code"], value)] = AttributeOption.objects.create(
                            group=group, option=value
                        )
                ProductAttribute.objects.create(
                    product_class=cls, name=attr["name"], code=attr["code"], type=attr["type"],
                    required=attr.get("required", False), option_group=group,
                )  # fmt: skip

        Partner = self.m("partner", "Partner")
        Product = self.m("catalogue", "Product")
        ProductCategory = self.m("catalogue", "ProductCategory")
        StockRecord = self.m("partner", "StockRecord")
        ProductImage = self.m("catalogue", "ProductImage")
        partner = Partner.objects.create(name=self.seed["partner"])
        for number, spec in enumerate(self.seed["products"], start=1):
            at("2026-02-01T10:00:00")
            _now[0] += timedelta(hours=number)
            product = Product(
                title=spec["title"], upc=spec["upc"], description=spec["description"],
                product_class=classes[spec["product_class"]], structure=Product.STANDALONE,
            )  # fmt: skip
            for code, value in spec["attributes"].items():
                if code == "format":
                    value = options[(spec["product_class"], code, value)]
                setattr(product.attr, code, value)
            product.save()
            ProductCategory.objects.create(product=product, category=self.categories[spec["category"]])
            StockRecord.objects.create(
                product=product, partner=partner, partner_sku=f"HLM-{number:04d}", price=Decimal(spec["price"]),
                price_currency="USD", num_in_stock=spec["stock"], low_stock_threshold=3,
            )  # fmt: skip
            image = ProductImage(product=product, caption=spec["title"], display_order=0)
            image.original.name = self.draw_picture(spec)
            image.save()
            self.products[spec["title"]] = product

    def draw_picture(self, spec: dict) -> str:
        """A placeholder product picture (the shop's colors and the title), as a media-relative path."""
        from PIL import Image, ImageDraw, ImageFont

        top, _, leaf = spec["category"].partition(" > ")
        picture = Image.new("RGB", (600, 600), PICTURE_COLORS[top])
        draw = ImageDraw.Draw(picture)
        draw.rounded_rectangle((40, 40, 560, 560), radius=28, outline=(255, 255, 255), width=4)
        small, large = ImageFont.load_default(size=26), ImageFont.load_default(size=46)
        draw.text((300, 95), leaf.upper(), font=small, fill=(235, 235, 235), anchor="mm")
        lines = textwrap.wrap(spec["title"], width=18)
        y = 300 - (len(lines) - 1) * 30
        for line in lines:
            draw.text((300, y), line, font=large, fill=(255, 255, 255), anchor="mm")
            y += 60
        draw.text((300, 505), self.seed["shop"]["name"], font=small, fill=(235, 235, 235), anchor="mm")
        relative = f"images/products/{spec['upc']}.png"
        target = self.media / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        picture.save(target, format="PNG", optimize=True)
        return relative

    # --- people ------------------------------------------------------------------------------------
    def accounts(self) -> None:
        from django.contrib.auth.hashers import make_password
        from django.contrib.auth.models import User

        UserAddress = self.m("address", "UserAddress")
        Country = self.m("address", "Country")
        us = Country.objects.get(pk="US")
        for spec in self.seed["users"]:
            joined = at(spec["joined"])
            salt = hashlib.sha256(spec["email"].encode()).hexdigest()[:22]
            user = User.objects.create(
                username=spec["email"], email=spec["email"], first_name=spec["first_name"],
                last_name=spec["last_name"], password=make_password(spec["password"], salt=salt),
                is_staff=spec["role"] in ("admin", "staff"), is_superuser=spec["role"] == "admin",
                date_joined=joined,
            )  # fmt: skip
            self.users[spec["email"]] = user
            for address in spec.get("addresses", []):
                _now[0] += timedelta(minutes=5)
                UserAddress.objects.create(
                    user=user, title=address["title"], first_name=spec["first_name"], last_name=spec["last_name"],
                    line1=address["line1"], line2=address["line2"], line4=address["line4"], state=address["state"],
                    postcode=address["postcode"], country=us, phone_number=address["phone"],
                    is_default_for_shipping=address["default"], is_default_for_billing=address["default"],
                )  # fmt: skip

    def reviews(self) -> None:
        ProductReview = self.m("reviews", "ProductReview")
        statuses = {"approved": ProductReview.APPROVED, "for moderation": ProductReview.FOR_MODERATION}
        for spec in sorted(self.seed["reviews"], key=lambda r: r["date"]):
            at(spec["date"])
            ProductReview.objects.create(
                product=self.products[spec["product"]], user=self.users[spec["user"]], score=spec["score"],
                title=spec["title"], body=spec["body"], status=statuses[spec.get("status", "approved")],
            )  # fmt: skip

    def offers(self) -> None:
        Range = self.m("offer", "Range")
        Condition = self.m("offer", "Condition")
        Benefit = self.m("offer", "Benefit")
        ConditionalOffer = self.m("offer", "ConditionalOffer")
        Voucher = self.m("voucher", "Voucher")
        at("2026-01-01T09:00:00")
        ranges = {}
        for spec in self.seed["ranges"]:
            ranges[spec["name"]] = product_range = Range.objects.create(
                name=spec["name"], includes_all_products=spec.get("all_products", False)
            )
            for category in spec.get("categories", []):
                product_range.included_categories.add(self.categories[category])
        offers = {}
        for spec in self.seed["offers"]:
            product_range = ranges[spec["range"]]
            condition = Condition.objects.create(
                range=product_range, type=spec["condition"]["type"], value=Decimal(spec["condition"]["value"])
            )
            benefit = Benefit.objects.create(
                range=product_range, type=spec["benefit"]["type"], value=Decimal(spec["benefit"]["value"])
            )
            offers[spec["name"]] = ConditionalOffer.objects.create(
                name=spec["name"], description=spec["description"], offer_type=spec["type"],
                condition=condition, benefit=benefit, start_datetime=at(spec["start"]),
                end_datetime=at(spec["end"]) if spec["end"] else None,
            )  # fmt: skip
        for spec in self.seed["vouchers"]:
            voucher = Voucher.objects.create(
                name=spec["name"], code=spec["code"], usage=spec["usage"],
                start_datetime=at(spec["start"]), end_datetime=at(spec["end"]),
            )  # fmt: skip
            voucher.offers.add(offers[spec["offer"]])

    # --- orders ------------------------------------------------------------------------------------
    def orders(self) -> None:
        """Each order as the checkout places it (with the offers and vouchers then open), then moved along
        the status pipeline as the dashboard does: shipped orders consume their stock allocation,
        cancelled ones release it."""
        from oscar.apps.shipping.methods import Free
        from oscar.core.loading import get_class

        OrderCreator = get_class("order.utils", "OrderCreator")
        OrderTotalCalculator = get_class("checkout.calculators", "OrderTotalCalculator")
        EventHandler = get_class("order.processing", "EventHandler")
        Applicator = get_class("offer.applicator", "Applicator")
        Voucher = self.m("voucher", "Voucher")
        Selector = get_class("partner.strategy", "Selector")
        Basket = self.m("basket", "Basket")
        ShippingAddress = self.m("order", "ShippingAddress")
        ShippingEventType = self.m("order", "ShippingEventType")
        shipped_event = ShippingEventType.objects.create(name="Shipped", code="shipped")
        pipeline = ["Pending", "Being processed", "Shipped", "Complete"]
        for spec in self.seed["orders"]:
            placed = at(spec["placed"])
            user = self.users[spec["customer"]]
            basket = Basket.objects.create(owner=user)
            basket.strategy = Selector().strategy(user=user)
            for title, quantity in spec["lines"]:
                basket.add_product(self.products[title], quantity)
            if spec.get("voucher"):
                basket.vouchers.add(Voucher.objects.get(code=spec["voucher"]))
            Applicator().apply(basket, user)
            user_address = user.addresses.get(is_default_for_shipping=True)
            shipping_address = ShippingAddress()
            user_address.populate_alternative_model(shipping_address)
            shipping_address.save()
            user_address.num_orders_as_shipping_address += 1
            user_address.save()
            method = Free()
            charge = method.calculate(basket)
            total = OrderTotalCalculator().calculate(basket, charge)
            order = OrderCreator().place_order(
                basket=basket, total=total, shipping_method=method, shipping_charge=charge, user=user,
                shipping_address=shipping_address, order_number=spec["number"],
            )  # fmt: skip
            basket.submit()
            handler = EventHandler(user=self.users["admin@example.com"])
            lines = list(order.lines.all())
            quantities = [line.quantity for line in lines]
            steps = pipeline[1 : pipeline.index(spec["status"]) + 1] if spec["status"] != "Cancelled" else []
            for day, status in enumerate(steps, start=1):
                _now[0] = placed + timedelta(days=day, hours=2)
                if status == "Shipped":
                    handler.consume_stock_allocations(order, lines, quantities)
                    handler.create_shipping_event(order, shipped_event, lines, quantities)
                handler.handle_order_status_change(order, status)
            if spec["status"] == "Cancelled":
                _now[0] = placed + timedelta(hours=5)
                handler.handle_order_status_change(order, "Cancelled")
                handler.cancel_stock_allocations(order, lines, quantities)

    def open_baskets(self) -> None:
        from oscar.core.loading import get_class

        Selector = get_class("partner.strategy", "Selector")
        Basket = self.m("basket", "Basket")
        for spec in self.seed["baskets"]:
            at(spec["created"])
            owner = self.users[spec["owner"]]
            basket = Basket.objects.create(owner=owner)
            basket.strategy = Selector().strategy(user=owner)
            for title, quantity in spec["lines"]:
                basket.add_product(self.products[title], quantity)

    def wishlists(self) -> None:
        WishList = self.m("wishlists", "WishList")
        for spec in self.seed["wishlists"]:
            at(spec["created"])
            wishlist = WishList.objects.create(
                owner=self.users[spec["owner"]], name=spec["name"], visibility=spec["visibility"]
            )
            WishList.objects.filter(pk=wishlist.pk).update(
                key=spec["key"]
            )  # save() always draws a random one
            for title in spec["products"]:
                wishlist.add(self.products[title])

    def thumbnails(self) -> None:
        """Make the thumbnails the templates ask for now, so the first page after a reset is not slow."""
        from oscar.core.thumbnails import get_thumbnailer

        thumbnailer = get_thumbnailer()
        ProductImage = self.m("catalogue", "ProductImage")
        for image in ProductImage.objects.order_by("pk"):
            for size in THUMBNAIL_SIZES:
                thumbnailer.generate_thumbnail(image.original, size=size, upscale=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
