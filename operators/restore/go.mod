module cairn.dev/operators/restore

go 1.26.0

replace (
	cairn.dev/apis => ../../apis
	cairn.dev/libs => ../../libs
)
