
X

item.protoev">
Item
id (Rid
name (	Rname
gone (Rgonebproto3