module cairn.dev/operators/migration

go 1.26.0

replace (
	cairn.dev/agent => ../../agent
	cairn.dev/apis => ../../apis
	cairn.dev/libs => ../../libs
)
