
ò
m.protocom.acme"
Item
sku (	Rsku"º
Order
id (	Rid$
items (2.com.acme.ItemRitems1
by_sku (2.com.acme.Order.BySkuEntryRbySkuH

BySkuEntry
key (	Rkey$
value (2.com.acme.ItemRvalue:8bproto3